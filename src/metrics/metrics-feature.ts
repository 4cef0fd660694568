import { collectDefaultMetrics, Gauge, Registry } from 'prom-client';
import type { RouteTable } from '../http/route-table.js';
import type { EndpointService } from '../jobs/endpoint-service.js';
import type { EndpointHealth, JobService } from '../jobs/job-service.js';
import type { PoolView } from '../jobs/pool-view.js';
import type { KeyService } from '../security/keys.js';
import { packageVersion } from '../util/package-version.js';
import { HttpMetrics } from './http-metrics.js';
import { JobMetrics } from './job-metrics.js';
import type { MetricsConfig } from './metrics-config.js';
import { createMetricsRoute } from './metrics-route.js';
import { registerPoolMetrics } from './pool-metrics.js';
import { StoreTiming } from './store-timing.js';
import { WebhookMetrics } from './webhook-metrics.js';

/** What /metrics reads at scrape time and how it is guarded. */
export interface MetricsServeDeps {
  config: MetricsConfig;
  routes: RouteTable;
  keys: Pick<KeyService, 'authorize'>;
  endpoints: Pick<EndpointService, 'list'>;
  jobs: Pick<JobService, 'health'>;
  /** Whether this gateway runs the singletons now (gantry_leader). */
  isLeader(): boolean;
  /** The worker pools' cold starts (gantry_cold_start_*); absent: none reported. */
  pool?: Pick<PoolView, 'coldStarts'>;
}

/**
 * The metrics feature (docs/metrics.md): the observers the core reports to — jobs, requests,
 * webhook calls, store calls — each keeping plain numbers in memory, and `serve`, which adds
 * GET /metrics to the route table. Gauges (queue depth, workers by state) are read from the
 * store and the pool when Prometheus scrapes, never kept up to date on the hot path.
 *
 * @example
 * const metrics = createMetrics();
 * const gateway = createGateway({ ...options, store: metrics.store.wrap(store), observers: metrics.observers() });
 * metrics.serve({ config, routes: gateway.routes, keys: gateway.keys, endpoints: gateway.endpoints, jobs: gateway.jobs, isLeader });
 */
export function createMetrics(): Metrics {
  const registry = new Registry();
  const jobs = new JobMetrics();
  const http = new HttpMetrics();
  const webhooks = new WebhookMetrics();
  const store = new StoreTiming();
  for (const part of [jobs, http, webhooks, store]) part.register(registry);
  collectDefaultMetrics({ register: registry });
  return {
    registry,
    jobs,
    http,
    webhooks,
    store,
    serve(deps) {
      const refresh = registerStateGauges(registry, jobs, deps);
      deps.routes.add(createMetricsRoute({ config: deps.config, keys: deps.keys, registry, refresh }));
    },
  };
}

/** The metrics feature: its registry, the observers the gateway reports to, and its route. */
export interface Metrics {
  readonly registry: Registry;
  /** Jobs by endpoint: the JobObserver wired into the transitions. */
  readonly jobs: JobMetrics;
  /** Requests by route and status: the RequestObserver of the request listener. */
  readonly http: HttpMetrics;
  /** Webhook calls by outcome: wraps the webhook sender's fetch. */
  readonly webhooks: WebhookMetrics;
  /** Store call latency: wraps the store the gateway uses. */
  readonly store: StoreTiming;
  /** Adds GET /metrics to the route table; call once, after the gateway is created. */
  serve(deps: MetricsServeDeps): void;
}

/** Registers the scrape-time gauges; returns the function that reads them before each scrape. */
function registerStateGauges(registry: Registry, jobs: JobMetrics, deps: MetricsServeDeps): () => Promise<void> {
  const gauge = (name: string, help: string, labelNames: string[]) => new Gauge({ name, help, labelNames, registers: [registry] });
  const queued = gauge('gantry_queue_depth', 'Jobs waiting in the queue (IN_QUEUE), from the store.', ['endpoint']);
  const inProgress = gauge('gantry_jobs_in_progress', 'Jobs held by a worker (IN_PROGRESS), from the store.', ['endpoint']);
  const workers = gauge('gantry_workers', 'Workers by state, as /health counts them.', ['endpoint', 'state']);
  const leader = gauge('gantry_leader', '1 while this gateway runs the singletons (reaper, webhook sender, autoscaler).', []);
  gauge('gantry_build_info', 'The running Gantry version.', ['version']).set({ version: packageVersion() }, 1);
  const pools = deps.pool ? registerPoolMetrics(registry, deps.pool) : undefined;
  return async () => {
    const endpoints = await deps.endpoints.list();
    pools?.(endpoints.map((e) => e.id));
    const health = await Promise.all(endpoints.map((e) => deps.jobs.health(e.id).then((h): [string, EndpointHealth] => [e.id, h])));
    jobs.keepOnly(new Set(endpoints.map((e) => e.id)));
    for (const g of [queued, inProgress, workers]) g.reset();
    for (const [endpoint, h] of health) {
      queued.set({ endpoint }, h.jobs.inQueue);
      inProgress.set({ endpoint }, h.jobs.inProgress);
      for (const state of ['idle', 'running', 'initializing', 'throttled', 'unhealthy'] as const) workers.set({ endpoint, state }, h.workers[state]);
    }
    leader.set(deps.isLeader() ? 1 : 0);
  };
}
