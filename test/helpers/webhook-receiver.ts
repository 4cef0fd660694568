// A webhook receiver for tests, and jobs finished through one worker so their webhooks go out.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'vitest';
import { call, uniqueId } from '../http/http-helpers.js';
import type { TestGantry } from './gantry.js';

export interface ReceiverStats {
  requests: number;
  /** Connections open now, most open at once, made in all, and seen closed. */
  open: number;
  maxOpen: number;
  connections: number;
  closed: number;
}

/** A receiver on loopback that counts requests and connections; `answer: false` never answers. */
export async function countingReceiver(answer: boolean): Promise<{ url: string; stats: ReceiverStats; close(): Promise<void> }> {
  const stats: ReceiverStats = { requests: 0, open: 0, maxOpen: 0, connections: 0, closed: 0 };
  const server: Server = createServer((req, res) => {
    stats.requests++;
    req.resume();
    if (answer) res.end('ok');
  });
  server.on('connection', (socket) => {
    stats.connections++;
    stats.open++;
    stats.maxOpen = Math.max(stats.maxOpen, stats.open);
    socket.on('close', () => {
      stats.open--;
      stats.closed++;
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    stats,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** Submits `n` jobs of endpoint `ep` with `webhook` under the run key `key`, and finishes them all through one worker (key `worker`). */
export async function finishJobsWithWebhook(t: TestGantry, ep: string, keys: { run: string; worker: string }, n: number, webhook: string): Promise<void> {
  for (let i = 0; i < n; i++) expect((await call(t.url, 'POST', `/v2/${ep}/run`, { key: keys.run, body: { input: { i }, webhook } })).status).toBe(200);
  const w = uniqueId('w');
  let done = 0;
  while (done < n) {
    const taken = await call(t.url, 'GET', `/v2/${ep}/job-take-batch/${w}?batch_size=100`, { key: keys.worker });
    const jobs = (taken.status === 200 ? taken.json : []) as unknown as { id: string }[];
    for (const job of jobs) {
      expect((await call(t.url, 'POST', `/v2/${ep}/job-done/${w}/${job.id}`, { key: keys.worker, body: { output: 'ok' } })).status).toBe(200);
      done++;
    }
  }
}
