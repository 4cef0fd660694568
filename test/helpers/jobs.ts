// Shared factories for what tests set up through the SDK clients: endpoints with fresh ids,
// keys, batches of jobs, and waits on them. Setup only — a test of a route's wire format sends
// its requests itself (test/http/http-helpers.ts).
import type { AdminClient, CreateEndpointRequest, Scope } from '../../src/sdk/admin-client.js';
import type { GantryClient, Job } from '../../src/sdk/client.js';
import { eventually } from './gantry.js';

/** A gateway as the factories need it: TestGantry (in this process) and ServeProcess (`gantry serve`) both are. */
export interface GatewayHandle {
  url: string;
  adminKey: string;
  admin: AdminClient;
  /** The job API with `apiKey` (default: the admin key). */
  client(apiKey?: string): GantryClient;
}

let counter = 0;
/** A fresh id per call (endpoint and worker ids): prefix, this process, a counter and a random tail. */
export function uniqueId(prefix: string): string {
  return `${prefix}-${process.pid}-${++counter}-${Math.random().toString(36).slice(2, 7)}`;
}

/**
 * Creates an endpoint with a fresh id (or `settings.id`); returns the id.
 *
 * @example const ep = await newEndpoint(g, { workersMax: 2, worker: { command: ECHO } });
 */
export async function newEndpoint(g: Pick<GatewayHandle, 'admin'>, settings: Partial<CreateEndpointRequest> = {}, prefix = 'ep'): Promise<string> {
  const id = settings.id ?? uniqueId(prefix);
  await g.admin.createEndpoint({ ...settings, id });
  return id;
}

/** A key with `scopes` (limited to `endpoints` when given). */
export async function newKey(g: Pick<GatewayHandle, 'admin'>, scopes: Scope[], endpoints?: string[]): Promise<string> {
  return (await g.admin.createKey({ name: `test ${scopes.join('+')}`, scopes, ...(endpoints ? { endpoints } : {}) })).key;
}

/** A run+read key and a worker key: what a client and a worker of a test need. */
export async function runAndWorkerKeys(g: Pick<GatewayHandle, 'admin'>): Promise<{ run: string; worker: string }> {
  return { run: await newKey(g, ['run', 'read']), worker: await newKey(g, ['worker']) };
}

/**
 * Submits one job per input (a count: inputs `{ i }`), `concurrency` at a time; returns the ids in input order.
 *
 * @example const ids = await submitJobs(g.client(), ep, 20);
 */
export async function submitJobs(client: GantryClient, endpointId: string, inputs: number | unknown[], concurrency = 8): Promise<string[]> {
  const list = typeof inputs === 'number' ? Array.from({ length: inputs }, (_, i) => ({ i })) : inputs;
  const ids: string[] = new Array<string>(list.length);
  let next = 0;
  const submitter = async (): Promise<void> => {
    for (let i = next++; i < list.length; i = next++) ids[i] = (await client.run(endpointId, { input: list[i] })).id;
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, list.length) }, submitter));
  return ids;
}

/**
 * Waits until every job has ended (status-sync long-polls: woken by the end itself, not polled);
 * fails naming the jobs still live after `timeoutMs`.
 */
export async function waitForJobs(client: GantryClient, endpointId: string, ids: string[], timeoutMs = 60_000): Promise<Job[]> {
  const jobs = await Promise.all(ids.map((id) => client.wait(endpointId, id, { timeoutMs })));
  const live = jobs.filter((j) => j.status === 'IN_QUEUE' || j.status === 'IN_PROGRESS');
  if (live.length > 0) throw new Error(`${live.length} of ${ids.length} jobs of ${endpointId} still live after ${timeoutMs} ms: ${live.map((j) => `${j.id} ${j.status}`).join(', ')}`);
  return jobs;
}

/** One job's end (see waitForJobs). */
export async function waitForJob(client: GantryClient, endpointId: string, id: string, timeoutMs = 60_000): Promise<Job> {
  return (await waitForJobs(client, endpointId, [id], timeoutMs))[0]!;
}

/** Waits until the gateway lists `workerId` among the endpoint's workers: a request of it has reached the gateway. */
export async function workerListed(g: Pick<GatewayHandle, 'admin'>, endpointId: string, workerId: string, timeoutMs = 20_000): Promise<void> {
  await eventually(async () => ((await g.admin.listWorkers(endpointId)).some((w) => w.id === workerId) ? true : undefined), timeoutMs, `${workerId} listed by the gateway`);
}
