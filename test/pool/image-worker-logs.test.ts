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

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

let t: TestGantry;

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
      const worker = await eventually(async () => (await t.admin.listWorkers(ep)).find((w) => w.managed && w.state === 'idle'), 30_000, `the ${ep} worker to be ready`);
      // Lines reach the store in batches (docs/logs.md): read once the ready note is there.
      const lines = await eventually(async () => {
        const l = (await t.admin.workerLogs(ep, worker.id, 200)).map((x) => `${x.stream}: ${x.line}`);
        return l.some((x) => x.startsWith('gantry: ready: ')) ? l : undefined;
      }, 10_000, 'the ready note in the stored log');
      expect(lines.some((l) => l.startsWith('gantry: started: pid '))).toBe(true);
      expect(lines.some((l) => l.startsWith('stdout: ') && l.includes('image model loaded'))).toBe(true);
      expect(lines.some((l) => /^gantry: ready: first poll \d+ ms after start$/.test(l))).toBe(true);
    }, 150_000);
  }

  it('a stopped image worker keeps its log', async () => {
    const ep = IMAGE_DEFAULTS.fastId;
    const worker = (await t.admin.listWorkers(ep)).find((w) => w.state === 'idle');
    if (!worker) throw new Error(`no idle ${ep} worker`);
    // workersMin 0 and a short idle timeout: the idle worker is scaled down.
    await t.admin.updateEndpoint(ep, { workersMin: 0, idleTimeout: 1 });
    const stopped = await eventually(async () => (await t.admin.listWorkers(ep)).find((w) => w.id === worker.id && w.state === 'stopped'), 60_000, 'the image worker to be stopped');
    expect(stopped.reason).toMatch(/^scaled down/);
    expect(JSON.stringify(await t.admin.workerLogs(ep, worker.id, 500))).toContain('image model loaded');
  }, 90_000);
});
