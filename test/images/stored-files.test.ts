// The image endpoints' files kept in the database (issue 25.2, docs/postgres.md "Files of the image
// endpoints"): on PostgreSQL without S3 an image worker uploads its file through the gateway's
// upload route (the worker-side store, createGatewayObjectStore, against a real gateway) and the
// signed /files URL serves it from the database; bad uploads are 4xx naming the field; all files
// together stay within GANTRY_IMAGE_FILES_MAX_BYTES, the oldest deleted first. On SQLite there
// is no upload route: the local folder stays.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IMAGE_DEFAULTS } from '../../src/config/image-config.js';
import { createGatewayObjectStore, deriveFileSigningKey } from '../../src/images/object-store.js';
import { loadSecretKey } from '../../src/security/secret-box.js';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { call } from '../http/http-helpers.js';

const FAST = 'image-fast';
/** The least the bound takes: three files of 6 MB do not fit. */
const MAX_BYTES = 16_000_000;

describe('image files in the database (postgres store, no S3)', () => {
  let t: TestGantry;
  let workerKey: string;
  let signingKey: Buffer;

  beforeAll(async () => {
    t = await startTestGantry({ images: { ...IMAGE_DEFAULTS, workers: false, filesMaxBytes: MAX_BYTES } }, { backend: 'postgres' });
    workerKey = await t.createKey(['worker']);
    signingKey = deriveFileSigningKey(loadSecretKey(t.dataDir, { GANTRY_SECRET_KEY: Buffer.alloc(32, 7).toString('base64') }));
  }, 60_000);

  afterAll(async () => {
    await t?.close();
  });

  const store = () => createGatewayObjectStore({ uploadUrl: `${t.url}/v2/${FAST}/files`, endpointId: FAST, workerKey, baseUrl: t.url, signingKey, ttlSeconds: 600, attempts: 1 });
  const upload = (name: string, body: unknown, key = workerKey) => call(t.url, 'PUT', `/v2/${FAST}/files/${name}`, { key, body });

  it("a worker's upload is served at its signed URL, from the database", async () => {
    const bytes = randomBytes(300_000);
    const url = await store().put(`${FAST}/job-1.png`, bytes, 'image/png');
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/png');
    expect(Buffer.from(await res.arrayBuffer()).equals(bytes)).toBe(true);
    // Larger than one slice read from the database (1 MiB).
    const big = randomBytes(2_500_000);
    const bigUrl = await store().put(`${FAST}/job-2.jpeg`, big, 'image/jpeg');
    expect(Buffer.from(await (await fetch(bigUrl)).arrayBuffer()).equals(big)).toBe(true);
    expect((await fetch(bigUrl.replace(/sig=[^&]+/, 'sig=AAAA'))).status).toBe(403);
  });

  it('refuses bad uploads with 4xx naming the field, and keys without the worker scope', async () => {
    const data = Buffer.from('png').toString('base64');
    expect((await upload('a.png', { contentType: 'image/gif', data })).json).toMatchObject({ code: 'INVALID_PARAMETER', field: 'contentType' });
    expect((await upload('a.jpeg', { contentType: 'image/png', data })).json).toMatchObject({ code: 'INVALID_PARAMETER', field: 'name' });
    expect((await upload('a.png', { contentType: 'image/png', data: 'not base64!' })).json).toMatchObject({ code: 'INVALID_PARAMETER', field: 'data' });
    expect((await upload('a.png', { contentType: 'image/png', data, extra: 1 })).json).toMatchObject({ code: 'INVALID_PARAMETER', field: 'extra' });
    expect((await upload('..%2Fa.png', { contentType: 'image/png', data })).status).toBe(400);
    const runKey = await t.createKey(['run']);
    expect((await upload('a.png', { contentType: 'image/png', data }, runKey)).status).toBe(401);
    await expect(store().put('other-endpoint/a.png', Buffer.from('x'), 'image/png')).rejects.toThrow(/invalid object key/);
  });

  it('keeps all files within GANTRY_IMAGE_FILES_MAX_BYTES, deleting the oldest first', async () => {
    const urls: string[] = [];
    for (let i = 0; i < 3; i++) urls.push(await store().put(`${FAST}/bound-${i}.png`, randomBytes(6_000_000), 'image/png'));
    expect((await fetch(urls[0]!)).status).toBe(404);
    for (const url of urls.slice(1)) {
      const res = await fetch(url);
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    }
  });
});

describe('image files on SQLite', () => {
  it('have no upload route: a lone gateway keeps them in its data folder', async () => {
    const t = await startTestGantry({ images: { ...IMAGE_DEFAULTS, workers: false } });
    try {
      const key = await t.createKey(['worker']);
      const res = await call(t.url, 'PUT', `/v2/${FAST}/files/a.png`, { key, body: { contentType: 'image/png', data: 'AAAA' } });
      expect(res.status).toBe(404);
    } finally {
      await t.close();
    }
  });
});
