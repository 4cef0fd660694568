import type { Registry } from 'prom-client';
import type { RequestObserver } from '../http/server.js';
import { counter } from './job-metrics.js';

/**
 * Counts answered requests by route pattern and status, and 429 refusals by route and code
 * (the RequestObserver of the HTTP layer). Per request: a map lookup by route and one array
 * write; routes are patterns (a bounded set), never raw paths.
 */
export class HttpMetrics implements RequestObserver {
  /** Per route: counts indexed by status code (100–599). */
  private readonly answers = new Map<string, Float64Array>();
  private readonly refusals = new Map<string, number>();

  answered(route: string, status: number): void {
    let counts = this.answers.get(route);
    if (counts === undefined) this.answers.set(route, (counts = new Float64Array(600)));
    counts[status >= 100 && status < 600 ? status : 599]! += 1;
  }

  throttled(route: string, code: string): void {
    const key = `${route} ${code}`;
    this.refusals.set(key, (this.refusals.get(key) ?? 0) + 1);
  }

  /** Registers gantry_http_requests_total and gantry_rate_limited_total, filled at scrape time. */
  register(registry: Registry): void {
    counter(registry, 'gantry_http_requests_total', 'HTTP requests answered, by route pattern and status code.', ['route', 'status'], (set) => {
      for (const [route, counts] of this.answers) {
        for (let status = 100; status < 600; status++) if (counts[status]! > 0) set({ route, status: String(status) }, counts[status]!);
      }
    });
    counter(registry, 'gantry_rate_limited_total', 'Requests refused with 429, by route and reason (RATE_LIMITED, TOO_MANY_CONCURRENT, QUEUE_FULL).', ['route', 'code'], (set) => {
      for (const [key, n] of this.refusals) {
        const space = key.lastIndexOf(' ');
        set({ route: key.slice(0, space), code: key.slice(space + 1) }, n);
      }
    });
  }
}
