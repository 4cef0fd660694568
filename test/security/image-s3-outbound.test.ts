// Issue 9, item 9 (image feature): a job's own s3Config.endpointUrl is called by the image
// worker under the outbound policy. A refused address is never called; an allowed one that
// answers with an error does not get its answer copied into the job's error (no proxy, no
// port scanner). Runs the real image workers (tiny demo model) from the build (npm run build).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IMAGE_DEFAULTS } from '../../src/config/image-config.js';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';

const SECRET = 'INTERNAL-ADMIN-PANEL-token=hunter2';
let server: Server;
let internal: string;
let hits = 0;

beforeAll(async () => {
  server = createServer((req, res) => {
    hits++;
    req.resume();
    res.writeHead(500, { 'content-type': 'text/plain' }).end(SECRET);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  internal = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

async function runImage(t: TestGantry, endpointUrl: string) {
  const key = await t.createKey(['run', 'read']);
  const res = await fetch(`${t.url}/v2/image-fast/runsync`, {
    method: 'POST',
    headers: { authorization: key, 'content-type': 'application/json' },
    body: JSON.stringify({ input: { prompt: 'harbour', width: 256, height: 256, num_inference_steps: 1 }, s3Config: { accessId: 'a', accessSecret: 'b', bucketName: 'c', endpointUrl } }),
  });
  expect(res.status).toBe(200);
  return (await res.json()) as { status: string; error?: string };
}

describe.each([
  ['no GANTRY_OUTBOUND_ALLOW', [] as string[]],
  ['GANTRY_OUTBOUND_ALLOW=127.0.0.1', ['127.0.0.1']],
])('a job s3Config.endpointUrl on this machine (%s)', (_name, allow) => {
  let t: TestGantry;
  beforeAll(async () => {
    t = await startTestGantry({ images: { ...IMAGE_DEFAULTS, workers: true, urlTtlSeconds: 3600 }, outboundAllow: allow });
  }, 120_000);
  afterAll(() => t?.close());

  it(allow.length === 0 ? 'is not called: the job fails naming the policy' : 'is called, and its answer stays out of the job', async () => {
    const before = hits;
    const job = await runImage(t, `${internal}/probe`);
    expect(job.status).toBe('FAILED');
    expect(job.error).not.toContain(SECRET);
    expect(job.error).not.toContain('hunter2');
    if (allow.length === 0) {
      expect(hits).toBe(before);
      expect(job.error).toContain('outbound policy');
      const metadata = await runImage(t, 'http://169.254.169.254/latest/meta-data/');
      expect(metadata.status).toBe('FAILED');
      expect(metadata.error).toContain('outbound policy');
    } else {
      expect(hits).toBe(before + 1);
      expect(job.error).toContain('HTTP 500');
    }
  }, 120_000);
});
