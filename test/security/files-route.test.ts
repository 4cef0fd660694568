// Issue 9, item 13: a signed /files URL for a directory (or for a file gone before it is read)
// answers 404 at once instead of never answering, and log lines never carry a /files URL's
// query string (its `sig` grants access).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IMAGE_DEFAULTS } from '../../src/config/image-config.js';
import { deriveFileSigningKey, fileSignature } from '../../src/images/object-store.js';
import { loadSecretKey } from '../../src/security/secret-box.js';
import { startGantry, type Gantry } from '../../src/server.js';

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
});
