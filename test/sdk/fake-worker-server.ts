/**
 * A scripted stand-in for the server side of the worker protocol, recording every request,
 * so the SDK's wire format can be checked exactly (the real server is tested end to end in
 * worker.test.ts).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RecordedRequest {
  method: string;
  url: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: string;
  /** When the request's body had arrived (Date.now()). */
  at: number;
}

export interface FakeWorkerServer {
  url: string;
  requests: RecordedRequest[];
  /** Queues jobs for the next job-take (or job-take-batch) poll. */
  enqueue(...jobs: object[]): void;
  /** Answers the open (or next) job-stop poll with these ids. */
  stopJobs(...ids: string[]): void;
  /** Statuses for the next job-done posts, in order (then 200). */
  doneStatuses: number[];
  /** Status for every job-take poll (default: long-poll with jobs). */
  takeStatus: number | null;
  posts(kind: 'job-done' | 'job-stream'): { path: string; query: string; body: unknown }[];
  close(): Promise<void>;
}

const HOLD_MS = 300;

/** `holdMs`: how long a job-take or job-stop poll with nothing to answer is held (default HOLD_MS). */
export async function startFakeWorkerServer({ holdMs = HOLD_MS }: { holdMs?: number } = {}): Promise<FakeWorkerServer> {
  const queue: object[] = [];
  const stopIds: string[] = [];
  const takeWaiters = new Set<() => void>();
  const stopWaiters = new Set<() => void>();
  const requests: RecordedRequest[] = [];

  const hold = (waiters: Set<() => void>, ready: () => boolean, answer: () => void, res: ServerResponse): void => {
    if (ready()) return answer();
    const timer = setTimeout(() => {
      waiters.delete(wake);
      res.writeHead(204).end();
    }, holdMs);
    const wake = (): void => {
      if (!ready()) return;
      clearTimeout(timer);
      waiters.delete(wake);
      answer();
    };
    waiters.add(wake);
    res.on('close', () => {
      clearTimeout(timer);
      waiters.delete(wake);
    });
  };

  const fake: FakeWorkerServer = {
    url: '',
    requests,
    doneStatuses: [],
    takeStatus: null,
    enqueue(...jobs) {
      queue.push(...jobs);
      for (const wake of [...takeWaiters]) wake();
    },
    stopJobs(...ids) {
      stopIds.push(...ids);
      for (const wake of [...stopWaiters]) wake();
    },
    posts(kind) {
      return requests
        .filter((r) => r.method === 'POST' && r.path.includes(`/${kind}/`))
        .map((r) => ({ path: r.path, query: r.url.slice(r.path.length), body: JSON.parse(r.body) as unknown }));
    },
    close: () => new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };

  const json = (res: ServerResponse, status: number, body: unknown): void => {
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  };

  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      const url = req.url ?? '';
      const path = url.split('?')[0] ?? '';
      requests.push({ method: req.method ?? '', url, path, headers: req.headers, body, at: Date.now() });
      if (path.includes('/job-take-batch/') || path.includes('/job-take/')) {
        if (fake.takeStatus !== null) return json(res, fake.takeStatus, { error: 'scripted' });
        const batch = path.includes('/job-take-batch/');
        const size = batch ? Number(/batch_size=(\d+)/.exec(url)?.[1] ?? '1') : 1;
        hold(takeWaiters, () => queue.length > 0, () => {
          const jobs = queue.splice(0, size);
          json(res, 200, batch ? jobs : jobs[0]);
        }, res);
      } else if (path.includes('/job-stop/')) {
        hold(stopWaiters, () => stopIds.length > 0, () => json(res, 200, { jobsToStop: stopIds.splice(0) }), res);
      } else if (path.includes('/job-done/')) {
        json(res, fake.doneStatuses.shift() ?? 200, {});
      } else if (path.includes('/job-stream/') || path.includes('/ping/')) {
        json(res, 200, {});
      } else {
        json(res, 404, { error: 'not found', code: 'NOT_FOUND' });
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return fake;
}

/** Polls `check` every 10 ms until it returns a truthy value or `timeoutMs` passes. */
export async function waitFor<T>(check: () => T | false | null | undefined, timeoutMs = 5000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
