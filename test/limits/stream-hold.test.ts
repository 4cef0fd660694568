// Issue 9 item 18: an empty /stream is held well under runpod-python's 10 s read timeout
// (`job.stream()` sends no `wait`), so a poll of a quiet job answers instead of timing out.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';

/** runpod-python's RunPodClient.get: a 10 s read timeout. */
const RUNPOD_PYTHON_READ_TIMEOUT_MS = 10_000;

describe('an empty /stream is held under the clients read timeouts', () => {
  let gantry: TestGantry;
  let key: string;

  beforeAll(async () => {
    gantry = await startTestGantry();
    key = await gantry.createKey(['run', 'read']);
    await gantry.createEndpoint('quiet');
  });
  afterAll(async () => gantry?.close());

  it('answers a /stream with no wait before a 10 s read timeout runs out', async () => {
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    // No worker: the job stays queued, its stream empty, so the poll is held for the whole default wait.
    const run = await fetch(`${gantry.url}/v2/quiet/run`, { method: 'POST', headers, body: JSON.stringify({ input: {} }) });
    const { id } = (await run.json()) as { id: string };
    const res = await fetch(`${gantry.url}/v2/quiet/stream/${id}`, { headers, signal: AbortSignal.timeout(RUNPOD_PYTHON_READ_TIMEOUT_MS) });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ id, status: 'IN_QUEUE', stream: [] });
  }, 20_000);
});
