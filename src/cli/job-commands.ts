/**
 * The job commands: `gantry run|runsync|status|stream|cancel|retry|purge|health`, over the
 * typed client (sdk/client.ts). Text for people by default, `--json` for scripts. Exit codes:
 * 0 done (a waited-for job COMPLETED), 1 the server refused or could not be reached, 2 a bad
 * flag, 3 the job ended FAILED, CANCELLED or TIMED_OUT, 4 --timeout passed before it ended.
 */
import { readFileSync } from 'node:fs';
import { POLICY_LIMITS } from '../jobs/policy.js';
import { isTerminal, type Job, type JobPolicy, type RunRequest } from '../sdk/client.js';
import { expectPositionals, parseFlags, parseInteger, range, UsageError } from './args.js';
import { connectJobs, JOB_CONNECTION_HELP, JOB_OPTIONS } from './connection.js';
import { createProgress, formatMs, formatOutput, printFields, printJson } from './output.js';
import type { Subcommand } from './subcommands.js';

const SUBMIT_OPTIONS = {
  ...JOB_OPTIONS,
  input: { type: 'string' },
  webhook: { type: 'string' },
  ttl: { type: 'string' },
  'execution-timeout': { type: 'string' },
  'low-priority': { type: 'boolean' },
  timeout: { type: 'string' },
} as const;

const TIMEOUT_HELP = `  --timeout S               stop waiting after S seconds (exit 4; the job goes on); default: until it ends`;

const SUBMIT_HELP = `job:
  --input JSON|@FILE|-      the job's input object: JSON text, a file (@path) or stdin (-); default {}
  --webhook URL             POSTed the job when it ends
  --ttl MS                  how long it may wait in the queue and its result is kept: ${range(POLICY_LIMITS.minTtlMs, POLICY_LIMITS.maxTtlMs, POLICY_LIMITS.defaultTtlMs)}
  --execution-timeout MS    longest it may run: ${POLICY_LIMITS.minExecutionTimeoutMs + 1}–${POLICY_LIMITS.maxExecutionTimeoutMs} (default: the endpoint's)
  --low-priority            never makes the autoscaler start a worker`;

/** Exit code of a job that ended otherwise than COMPLETED. */
const JOB_DID_NOT_COMPLETE = 3;
/** Exit code when --timeout passed first. */
const STILL_RUNNING = 4;

/** The input object from --input: JSON text, @file or - (stdin). */
function readInput(value: string | undefined): unknown {
  if (value === undefined) return {};
  let text = value;
  if (value === '-') text = readFileSync(0, 'utf8');
  else if (value.startsWith('@')) {
    try {
      text = readFileSync(value.slice(1), 'utf8');
    } catch (err) {
      throw new UsageError(`--input ${value}: cannot read the file (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
    }
  }
  let input: unknown;
  try {
    input = JSON.parse(text);
  } catch {
    throw new UsageError('--input is not valid JSON');
  }
  if (typeof input !== 'object' || input === null || Array.isArray(input)) throw new UsageError('--input must be a JSON object');
  return input;
}

type SubmitFlags = ReturnType<typeof parseFlags<typeof SUBMIT_OPTIONS>>['values'];

function submitRequest(values: SubmitFlags): RunRequest {
  const policy: JobPolicy = {};
  if (values.ttl !== undefined) policy.ttl = parseInteger('--ttl', values.ttl, POLICY_LIMITS.minTtlMs, POLICY_LIMITS.maxTtlMs);
  if (values['execution-timeout'] !== undefined) {
    policy.executionTimeout = parseInteger('--execution-timeout', values['execution-timeout'], POLICY_LIMITS.minExecutionTimeoutMs + 1, POLICY_LIMITS.maxExecutionTimeoutMs);
  }
  if (values['low-priority']) policy.lowPriority = true;
  const request: RunRequest = { input: readInput(values.input) };
  if (values.webhook !== undefined) request.webhook = values.webhook;
  if (Object.keys(policy).length > 0) request.policy = policy;
  return request;
}

/** --timeout in seconds as ms; Infinity without it. */
function timeoutOf(value: string | undefined): number {
  return value === undefined ? Infinity : parseInteger('--timeout', value, 1) * 1000;
}

/** Waits for the job to end (or the timeout), with a progress line on a terminal; prints it; returns the exit code. */
async function follow(values: { url?: string; key?: string; json?: boolean }, endpointId: string, first: Job, timeoutMs: number): Promise<number> {
  // Short long-polls, so the progress line shows each change of state.
  const client = connectJobs(values, 5_000);
  const progress = createProgress(!values.json, `${first.id}: ${first.status}`);
  const deadline = Date.now() + timeoutMs;
  let job = first;
  try {
    while (!isTerminal(job.status) && Date.now() < deadline) {
      job = await client.wait(endpointId, job.id, { timeoutMs: Math.min(5_000, deadline - Date.now()) });
      progress.update(`${job.id}: ${job.status}`);
    }
  } finally {
    progress.stop();
  }
  return printJob(job, values.json, endpointId);
}

/** Prints a job: JSON, or its output on stdout and a status line on stderr. Returns the exit code for it. */
function printJob(job: Job, json: boolean | undefined, endpointId: string): number {
  if (json) printJson(job);
  else if (job.status === 'COMPLETED') {
    if (job.output !== undefined) console.log(formatOutput(job.output));
    console.error(`${job.id} COMPLETED in ${formatMs(job.executionTime)} (queued ${formatMs(job.delayTime)})${job.workerId ? ` on ${job.workerId}` : ''}`);
  } else if (isTerminal(job.status)) console.error(`${job.id} ${job.status}${job.error ? `: ${job.error}` : ''}`);
  else console.error(`${job.id} is still ${job.status} (gantry status ${endpointId} ${job.id} --wait to go on waiting)`);
  if (!isTerminal(job.status)) return STILL_RUNNING;
  return job.status === 'COMPLETED' ? 0 : JOB_DID_NOT_COMPLETE;
}

async function runCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, { ...SUBMIT_OPTIONS, wait: { type: 'boolean' } });
  const [endpointId] = expectPositionals(positionals, ['ENDPOINT']);
  const request = submitRequest(values);
  const timeoutMs = timeoutOf(values.timeout);
  const ref = await connectJobs(values).run(endpointId, request);
  if (values.wait) return follow(values, endpointId, ref, timeoutMs);
  if (values.json) printJson(ref);
  else console.log(`${ref.id} ${ref.status}`);
  return 0;
}

async function runsyncCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, SUBMIT_OPTIONS);
  const [endpointId] = expectPositionals(positionals, ['ENDPOINT']);
  const request = submitRequest(values);
  const timeoutMs = timeoutOf(values.timeout);
  const progress = createProgress(!values.json, `runsync on ${endpointId}`);
  let first: Job;
  try {
    first = await connectJobs(values).runSync(endpointId, request, { timeoutMs: Math.min(timeoutMs, 60_000) });
  } finally {
    progress.stop();
  }
  return isTerminal(first.status) ? printJob(first, values.json, endpointId) : follow(values, endpointId, first, timeoutMs - 60_000);
}

async function statusCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, { ...JOB_OPTIONS, wait: { type: 'boolean' }, timeout: { type: 'string' } });
  const [endpointId, jobId] = expectPositionals(positionals, ['ENDPOINT', 'JOB_ID']);
  const timeoutMs = timeoutOf(values.timeout);
  const job = await connectJobs(values).status(endpointId, jobId);
  if (values.wait) return follow(values, endpointId, job, timeoutMs);
  if (values.json) printJson(job);
  else printFields(jobFields(job));
  return 0;
}

function jobFields(job: Job): [string, string][] {
  const fields: [string, string][] = [
    ['id', job.id],
    ['status', job.status],
    ['queued for', formatMs(job.delayTime)],
    ['ran for', formatMs(job.executionTime)],
    ['worker', job.workerId ?? '-'],
    ['retries', String(job.retries ?? 0)],
    ['attempts', String(job.attempts ?? 0)],
  ];
  if (job.error !== undefined) fields.push(['error', job.error]);
  if (job.output !== undefined) fields.push(['output', formatOutput(job.output)]);
  return fields;
}

async function streamCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, { ...JOB_OPTIONS, raw: { type: 'boolean' } });
  const [endpointId, jobId] = expectPositionals(positionals, ['ENDPOINT', 'JOB_ID']);
  const client = connectJobs(values);
  // A job that runs again after its worker was lost mid-stream starts over: the chunks printed so
  // far belong to an abandoned run. Say so where a reader sees it (stderr), and in --json output.
  let midLine = false;
  const onRestart = (attempt: number): void => {
    if (values.json) process.stdout.write(`${JSON.stringify({ restarted: true, attempt })}\n`);
    else if (midLine) process.stdout.write('\n');
    midLine = false;
    console.error(`--- job restarted (attempt ${attempt}) ---`);
  };
  for await (const chunk of client.stream(endpointId, jobId, { onRestart })) {
    midLine = Boolean(values.raw) && typeof chunk === 'string' && !chunk.endsWith('\n');
    if (values.json) process.stdout.write(`${JSON.stringify({ output: chunk })}\n`);
    else if (values.raw && typeof chunk === 'string') process.stdout.write(chunk);
    else process.stdout.write(`${typeof chunk === 'string' ? chunk : JSON.stringify(chunk)}\n`);
  }
  if (values.raw && !values.json) process.stdout.write('\n');
  const job = await client.status(endpointId, jobId);
  if (!values.json) console.error(`${job.id} ${job.status}${job.error ? `: ${job.error}` : ''}`);
  return job.status === 'COMPLETED' ? 0 : JOB_DID_NOT_COMPLETE;
}

async function cancelOrRetry(argv: string[], action: 'cancel' | 'retry'): Promise<number> {
  const { values, positionals } = parseFlags(argv, JOB_OPTIONS);
  const [endpointId, jobId] = expectPositionals(positionals, ['ENDPOINT', 'JOB_ID']);
  const client = connectJobs(values);
  const ref = action === 'cancel' ? await client.cancel(endpointId, jobId) : await client.retry(endpointId, jobId);
  if (values.json) printJson(ref);
  else console.log(`${ref.id} ${ref.status}`);
  return 0;
}

async function purgeCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, JOB_OPTIONS);
  const [endpointId] = expectPositionals(positionals, ['ENDPOINT']);
  const result = await connectJobs(values).purgeQueue(endpointId);
  if (values.json) printJson(result);
  else console.log(`cancelled ${result.removed} queued job${result.removed === 1 ? '' : 's'} of ${endpointId}`);
  return 0;
}

async function healthCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, JOB_OPTIONS);
  const [endpointId] = expectPositionals(positionals, ['ENDPOINT']);
  const health = await connectJobs(values).health(endpointId);
  if (values.json) return (printJson(health), 0);
  const { jobs, workers } = health;
  printFields([
    ['jobs', `${jobs.inQueue} queued, ${jobs.inProgress} in progress, ${jobs.completed} completed, ${jobs.failed} failed, ${jobs.cancelled} cancelled, ${jobs.timedOut} timed out, ${jobs.retried} retried, ${jobs.reattempted} reattempted`],
    ['workers', `${workers.ready} ready (${workers.idle} idle, ${workers.running} running), ${workers.initializing} initializing, ${workers.throttled} throttled, ${workers.unhealthy} unhealthy`],
  ]);
  return 0;
}

const JOB_ARGS = 'ENDPOINT JOB_ID';

/** The job commands by name, for the list of commands and `gantry <name> --help`. */
export const jobCommands: Record<string, Subcommand> = {
  run: {
    summary: 'submit a job; prints its id, or its result with --wait',
    usage: `usage: gantry run ENDPOINT [--input JSON|@FILE|-] [--wait] [options]\n\n  --wait                    wait for the job to end and print its output\n${TIMEOUT_HELP}\n\n${SUBMIT_HELP}\n\n${JOB_CONNECTION_HELP}`,
    run: runCommand,
  },
  runsync: {
    summary: 'submit a job and wait for its result',
    usage: `usage: gantry runsync ENDPOINT [--input JSON|@FILE|-] [options]\n\nPrints the output of a completed job; the status line goes to stderr.\n\n${TIMEOUT_HELP}\n\n${SUBMIT_HELP}\n\n${JOB_CONNECTION_HELP}`,
    run: runsyncCommand,
  },
  status: {
    summary: "show a job's state, times, output or error",
    usage: `usage: gantry status ${JOB_ARGS} [--wait] [options]\n\n  --wait                    wait for the job to end and print its output\n${TIMEOUT_HELP}\n\n${JOB_CONNECTION_HELP}`,
    run: statusCommand,
  },
  stream: {
    summary: "follow a job's streamed output live until it ends",
    usage: `usage: gantry stream ${JOB_ARGS} [--raw] [options]\n\nPrints each chunk as the worker streams it, one a line (--json: one {"output": …} a line).\nA job that runs again after its worker was lost mid-stream starts over: a line '--- job restarted (attempt N) ---' on stderr (--json: {"restarted": true, "attempt": N}) comes before the new run's output.\n\n  --raw                     write text chunks as they are, without a newline after each (tokens)\n\n${JOB_CONNECTION_HELP}`,
    run: streamCommand,
  },
  cancel: { summary: 'cancel a queued or running job', usage: `usage: gantry cancel ${JOB_ARGS} [options]\n\n${JOB_CONNECTION_HELP}`, run: (argv) => cancelOrRetry(argv, 'cancel') },
  retry: { summary: 'queue a failed or timed-out job again', usage: `usage: gantry retry ${JOB_ARGS} [options]\n\n${JOB_CONNECTION_HELP}`, run: (argv) => cancelOrRetry(argv, 'retry') },
  purge: { summary: 'cancel every queued job of an endpoint', usage: `usage: gantry purge ENDPOINT [options]\n\n${JOB_CONNECTION_HELP}`, run: purgeCommand },
  health: { summary: "an endpoint's jobs and workers by state", usage: `usage: gantry health ENDPOINT [options]\n\n${JOB_CONNECTION_HELP}`, run: healthCommand },
};
