// The image endpoints' files with two gateways on one PostgreSQL and no S3 (issue 25.2,
// docs/postgres.md "Files of the image endpoints"): the image worker (on the leader's pool, the
// real pipeline on the tiny model) uploads its file into the database through its gateway; the
// other gateway serves it at the same signed /files URL, and still does once the gateway that
// took it has stopped. Neither gateway's data folder holds it. Needs `npm run build`.
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/gantry.js';
import { newKey } from '../helpers/jobs.js';
import { createTestSchema, type TestSchema } from '../helpers/postgres.js';
import { startGateway, type ServeProcess } from '../helpers/serve-process.js';
import { call, type Json } from '../http/http-helpers.js';

// Shared by the gateways, as a deployment shares them (a gateway's admin key replaces another's).
const ADMIN_KEY = `files-admin-${randomBytes(8).toString('hex')}`;
const SECRET_KEY = randomBytes(32).toString('base64');
const FAST = 'image-fast';
const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47]);

interface Gateway extends ServeProcess {
  leader: boolean;
}

let schema: TestSchema;
const gateways: Gateway[] = [];

async function start(): Promise<Gateway> {
  const serve = await startGateway({
    adminKey: ADMIN_KEY,
    env: { DATABASE_URL: schema.url, GANTRY_SECRET_KEY: SECRET_KEY, GANTRY_IMAGE_WORKERS: 'on', GANTRY_IMAGE_THREADS: '1' },
  });
  const gw: Gateway = Object.assign(serve, { leader: false });
  const follow = (line: Json): void => {
    if (typeof line.leader === 'boolean') gw.leader = line.leader;
  };
  serve.logs().forEach(follow);
  serve.onLog(follow);
  return gw;
}

/** The file at `path` (with its signature) through `gw`: status and bytes. */
async function download(gw: Gateway, path: string): Promise<{ status: number; bytes: Buffer }> {
  const res = await fetch(`${gw.url}${path}`);
  return { status: res.status, bytes: Buffer.from(await res.arrayBuffer()) };
}

beforeAll(async () => {
  schema = await createTestSchema('files');
  gateways.push(...(await Promise.all([start(), start()])));
  await eventually(async () => (gateways.filter((g) => g.leader).length === 1 ? true : undefined), 20_000, 'one leader');
}, 180_000);

afterAll(async () => {
  for (const g of gateways) await g.stop();
  await schema?.drop();
}, 60_000);

describe('image files on two gateways sharing PostgreSQL, without S3', () => {
  it('an image made through one gateway is read through the other, and after the first stopped', async () => {
    const writer = gateways.find((g) => g.leader)!;
    const reader = gateways.find((g) => !g.leader)!;
    const key = await newKey(writer, ['run', 'read']);
    const run = await call(writer.url, 'POST', `/v2/${FAST}/run`, { key, body: { input: { prompt: 'two gateways', width: 256, height: 256, num_inference_steps: 1, image_format: 'png' } } });
    expect(run.status).toBe(200);
    const id = run.json.id as string;
    // The image worker starts with the leader's pool: its first job waits for it.
    const done = await eventually(async () => {
      const r = await call(writer.url, 'GET', `/v2/${FAST}/status/${id}`, { key });
      if (r.json.status === 'FAILED') throw new Error(`image job failed: ${r.text}`);
      return r.json.status === 'COMPLETED' ? r.json : undefined;
    }, 150_000, 'the image job completed');
    const url = new URL((done.output as { image_url: string }).image_url);
    expect(url.pathname).toBe(`/files/${FAST}/${id}.png`);
    const path = `${url.pathname}${url.search}`;

    const fromWriter = await download(writer, path);
    expect(fromWriter.status).toBe(200);
    expect(fromWriter.bytes.subarray(0, 4).equals(PNG)).toBe(true);
    const fromReader = await download(reader, path);
    expect(fromReader.status).toBe(200);
    expect(fromReader.bytes.equals(fromWriter.bytes)).toBe(true);
    // In the database, on neither gateway's disk.
    for (const g of gateways) expect(existsSync(join(g.dataDir, 'files', FAST, `${id}.png`))).toBe(false);
    // The signature still decides: a tampered one is 403 on the other gateway too.
    expect((await download(reader, path.replace(/sig=[^&]+/, 'sig=AAAA'))).status).toBe(403);

    expect(await writer.stop()).toBe(0);
    const afterStop = await download(reader, path);
    expect(afterStop.status).toBe(200);
    expect(afterStop.bytes.equals(fromWriter.bytes)).toBe(true);
    const head = await fetch(`${reader.url}${path}`, { method: 'HEAD' });
    expect([head.status, head.headers.get('content-type'), head.headers.get('content-length')]).toEqual([200, 'image/png', String(fromWriter.bytes.length)]);
  });
});
