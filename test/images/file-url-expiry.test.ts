// A /files URL signed correctly by the gateway's own key is refused with 403 once its `expires`
// has passed (docs: image results are links valid for a week), whatever the signature.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deriveFileSigningKey, fileSignature } from '../../src/images/object-store.js';
import { loadSecretKey } from '../../src/security/secret-box.js';
import { createOffsetClock } from '../helpers/clock.js';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { call } from '../http/http-helpers.js';

const clock = createOffsetClock();
let t: TestGantry;
let signingKey: Buffer;
const KEY = 'expiry-test/picture.png';

beforeAll(async () => {
  t = await startTestGantry({}, { backend: 'sqlite', clock });
  signingKey = deriveFileSigningKey(loadSecretKey(t.dataDir, {}));
  mkdirSync(join(t.dataDir, 'files', 'expiry-test'), { recursive: true });
  writeFileSync(join(t.dataDir, 'files', KEY), Buffer.from('not really a png'));
});

afterAll(async () => {
  await t?.close();
});

const signed = (expires: number) => `/files/${KEY}?expires=${expires}&sig=${fileSignature(signingKey, KEY, expires)}`;

describe('signed /files URLs', () => {
  it('serve the file until `expires`, then answer 403 FORBIDDEN', async () => {
    const expires = Math.floor(Date.now() / 1000) + 60;
    const fresh = await call(t.url, 'GET', signed(expires));
    expect(fresh.status).toBe(200);
    expect(fresh.text).toBe('not really a png');
    const late = await clock.ahead(61_000, () => call(t.url, 'GET', signed(expires)));
    expect(late.status).toBe(403);
    expect(late.json).toMatchObject({ code: 'FORBIDDEN' });
  });

  it('refuse a URL signed for a time already past', async () => {
    const r = await call(t.url, 'GET', signed(Math.floor(Date.now() / 1000) - 1));
    expect(r.status).toBe(403);
    expect(r.json).toMatchObject({ code: 'FORBIDDEN' });
  });
});
