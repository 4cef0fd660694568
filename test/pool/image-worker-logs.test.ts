// The built-in image workers (one per public image endpoint, src/images/worker-main.ts) are pool
// workers: listed as managed, and their logs (model loading, the device) read through the same
// route as any pool worker's, also after one is stopped. Tiny models on the CPU, as in
// test/images. Needs `npm run build` (the gateway with image workers runs from dist/).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IMAGE_DEFAULTS } from '../../src/config/image-config.js';
import { eventually, startTestGantry, type TestGantry } from '../helpers/gantry.js';

type Json = Record<string, unknown>;
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

let t: TestGantry;

async function api(method: string, path: string, body?: unknown): Promise<{ status: number; json: Json }> {
  const res = await fetch(`${t.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${t.adminKey}`, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, json: (await res.json()) as Json };
}

beforeAll(async () => {
  if (!existsSync(join(ROOT, 'dist/src/images/worker-main.js'))) throw new Error('run `npm run build` first');
  // logLevel reaches the image workers (LOG_LEVEL); the test gateway's own logger stays silent.
  t = await startTestGantry({ autoscalerIntervalMs: 50, workerStopGraceMs: 5_000, logLevel: 'info', images: { ...IMAGE_DEFAULTS, workers: true } });
}, 60_000);
afterAll(async () => {
  await t?.close();
}, 30_000);

describe('logs of the built-in image workers', () => {
  for (const ep of [IMAGE_DEFAULTS.fastId, IMAGE_DEFAULTS.qualityId]) {
    it(`${ep}: its worker is a pool worker whose log holds the model loading`, async () => {
      const worker = await eventually(async () => {
        const list = (await api('GET', `/admin/v1/endpoints/${ep}/workers`)).json.workers as Json[];
        return list.find((w) => w.managed === true && w.state === 'idle');
      }, 30_000, `the ${ep} worker to be ready`);
      // Lines reach the store in batches (docs/logs.md): read once the ready note is there.
      const lines = await eventually(async () => {
        const log = await api('GET', `/admin/v1/endpoints/${ep}/workers/${worker.id as string}/logs?lines=200`);
        expect(log.status).toBe(200);
        const l = (log.json.lines as { stream: string; line: string }[]).map((x) => `${x.stream}: ${x.line}`);
        return l.some((x) => x.startsWith('gantry: ready: ')) ? l : undefined;
      }, 10_000, 'the ready note in the stored log');
      expect(lines.some((l) => l.startsWith('gantry: started: pid '))).toBe(true);
      expect(lines.some((l) => l.startsWith('stdout: ') && l.includes('image model loaded'))).toBe(true);
      expect(lines.some((l) => /^gantry: ready: first poll \d+ ms after start$/.test(l))).toBe(true);
    }, 150_000);
  }

  it('a stopped image worker keeps its log', async () => {
    const ep = IMAGE_DEFAULTS.fastId;
    const [worker] = ((await api('GET', `/admin/v1/endpoints/${ep}/workers`)).json.workers as Json[]).filter((w) => w.state === 'idle');
    expect(worker).toBeDefined();
    // workersMin 0 and a short idle timeout: the idle worker is scaled down.
    expect((await api('PATCH', `/admin/v1/endpoints/${ep}`, { workersMin: 0, idleTimeout: 1 })).status).toBe(200);
    const stopped = await eventually(async () => {
      const list = (await api('GET', `/admin/v1/endpoints/${ep}/workers`)).json.workers as Json[];
      return list.find((w) => w.id === worker?.id && w.state === 'stopped');
    }, 60_000, 'the image worker to be stopped');
    expect(stopped.reason).toMatch(/^scaled down/);
    const log = await api('GET', `/admin/v1/endpoints/${ep}/workers/${worker?.id as string}/logs?lines=500`);
    expect(log.status).toBe(200);
    expect(JSON.stringify(log.json.lines)).toContain('image model loaded');
  }, 90_000);
});
