// Issue 9, item 13: a signed /files URL for a directory (or for a file gone before it is read)
// answers 404 at once instead of never answering, and log lines never carry a /files URL's
// query string (its `sig` grants access). Only a fault is logged with its URL, so the redaction
// is checked on one: a file whose read fails once the answer has begun.
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IMAGE_DEFAULTS } from '../../src/config/image-config.js';
import { deriveFileSigningKey, fileSignature } from '../../src/images/object-store.js';
import { loadSecretKey } from '../../src/security/secret-box.js';
import { startGantry, type Gantry } from '../../src/server.js';
import { eventually } from '../helpers/gantry.js';

describe('/files', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'gantry-files-'));
  const lines: string[] = [];
  let g: Gantry;
  let signingKey: Buffer;

  beforeAll(async () => {
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    g = await startGantry({
      env: {},
      config: { port: 0, host: '127.0.0.1', dataDir, adminKey: 'files-test-admin-key-0123456789', logLevel: 'debug', rateLimits: false, images: { ...IMAGE_DEFAULTS, workers: false } },
      logger: pino({ level: 'debug' }, sink),
    });
    signingKey = deriveFileSigningKey(loadSecretKey(dataDir, {}));
  });
  afterAll(async () => {
    await g?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const signed = (key: string) => {
    const expires = Math.floor(Date.now() / 1000) + 600;
    return `${g.url}/files/${key}?expires=${expires}&sig=${fileSignature(signingKey, key, expires)}`;
  };
  const get = (url: string, method = 'GET') => fetch(url, { method, signal: AbortSignal.timeout(5_000) });

  it('answers 404 for a directory, on GET and HEAD, and logs no signature', async () => {
    mkdirSync(join(dataDir, 'files', 'image-fast', 'folder.png'), { recursive: true });
    const url = signed('image-fast/folder.png');
    const r = await get(url);
    expect(r.status).toBe(404);
    expect(((await r.json()) as { code: string }).code).toBe('NOT_FOUND');
    expect((await get(url, 'HEAD')).status).toBe(404);
    const again = await get(signed('image-fast'));
    expect(again.status).toBe(404);
    await again.body?.cancel();
    expect(lines.join('')).not.toMatch(/sig=/);
  });

  it('still serves a file, and 404s once it is deleted', async () => {
    writeFileSync(join(dataDir, 'files', 'image-fast', 'a.png'), Buffer.from('png bytes'));
    const url = signed('image-fast/a.png');
    const r = await get(url);
    expect(r.status).toBe(200);
    expect(await r.text()).toBe('png bytes');
    rmSync(join(dataDir, 'files', 'image-fast', 'a.png'));
    const gone = await get(url);
    expect(gone.status).toBe(404);
    await gone.body?.cancel();
    expect(lines.join('')).not.toMatch(/sig=/);
  });

  // Only faults are logged with the request's URL (`request failed`, url): the 200, 403 and 404
  // answers above log none, so this is the case that shows the redaction. /proc/self/mem opens
  // as a regular file of size 0 whose first read fails with EIO.
  it.runIf(process.platform === 'linux')('logs a read error as a fault, with the URL but without its signature', async () => {
    mkdirSync(join(dataDir, 'files', 'image-fast'), { recursive: true });
    symlinkSync('/proc/self/mem', join(dataDir, 'files', 'image-fast', 'unreadable.png'));
    const before = lines.length;
    const url = signed('image-fast/unreadable.png');
    await get(url)
      .then((r) => r.arrayBuffer())
      .catch(() => undefined); // the connection is cut: the answer had begun
    const failed = await eventually(async () => lines.slice(before).find((l) => l.includes('request failed')), 5_000, 'a `request failed` log line');
    expect(failed).toContain('/files/image-fast/unreadable.png');
    expect(failed).toContain('EIO');
    expect(failed).not.toMatch(/sig=/);
    expect(lines.join('')).not.toMatch(/sig=/);
  });
});
