/**
 * The `--worker-*` flags of `gantry endpoints create|update`: how the autoscaler starts an
 * endpoint's workers, as a local command or as a container image on a Docker host
 * (docs/scaling.md). The server validates the whole spec again; the checks here only keep a
 * value it would refuse from leaving.
 */
import type { ContainerWorkerSpec, ProcessWorkerSpec, WorkerSpec } from '../sdk/admin-client.js';
import { parseInteger, parseKeyValues, parseList, UsageError } from './args.js';

/** The flags, for `parseFlags`. */
export const WORKER_OPTIONS = {
  'worker-command': { type: 'string' },
  'worker-env': { type: 'string', multiple: true },
  'worker-cwd': { type: 'string' },
  'worker-image': { type: 'string' },
  'worker-gpus': { type: 'string' },
  'worker-memory-mb': { type: 'string' },
  'worker-volume': { type: 'string', multiple: true },
  'worker-registry-credentials': { type: 'string' },
  'worker-prepull': { type: 'string' },
} as const;

/** The flags' values as `parseFlags` gives them. */
export interface WorkerFlags {
  'worker-command'?: string;
  'worker-env'?: string[];
  'worker-cwd'?: string;
  'worker-image'?: string;
  'worker-gpus'?: string;
  'worker-memory-mb'?: string;
  'worker-volume'?: string[];
  'worker-registry-credentials'?: string;
  'worker-prepull'?: string;
}

/** The server's bounds (jobs/endpoint-settings.ts). */
const MEMORY_MB: [number, number] = [6, 4_194_304];
const MAX_GPUS = 64;

/** Flags that only a container worker takes. */
const CONTAINER_ONLY = ['worker-gpus', 'worker-memory-mb', 'worker-volume', 'worker-registry-credentials', 'worker-prepull'] as const;

/** The help lines of the flags. */
export const WORKER_HELP = `  --worker-command CMD           command the autoscaler starts as a worker (with
                                 --worker-image: overrides the image's CMD)
  --worker-env K=V               environment of the worker (repeatable; replaces the whole set)
  --worker-cwd DIR               working directory of a command worker
  --worker-image IMAGE           run workers as containers of IMAGE on the Docker hosts
  --worker-gpus N|device=ID,..   GPUs per container: a count (0–${MAX_GPUS}) or device ids
  --worker-memory-mb N           memory limit per container, MiB (${MEMORY_MB[0]}–${MEMORY_MB[1]})
  --worker-volume SRC:DST[:ro]   a bind or named volume of the container (repeatable)
  --worker-registry-credentials ID
                                 pull the image with this saved registry login (rc_…,
                                 'gantry registry-credentials create'); 'none' removes it
  --worker-prepull true|false    pull the image onto every host that could run it, ahead of need`;

/** Whether any `--worker-*` flag was given. */
export function workerFlagsGiven(values: WorkerFlags): boolean {
  return (Object.keys(WORKER_OPTIONS) as (keyof WorkerFlags)[]).some((flag) => values[flag] !== undefined);
}

/** Whether a spec runs a container image. */
export function isContainerSpec(spec: WorkerSpec): spec is ContainerWorkerSpec {
  return 'image' in spec && typeof spec.image === 'string';
}

/**
 * Whether the flags describe a whole worker (a command or an image), rather than changes to the
 * endpoint's current one.
 */
export function namesWholeWorker(values: WorkerFlags): boolean {
  return values['worker-command'] !== undefined || values['worker-image'] !== undefined;
}

/**
 * The worker spec the flags ask for, on top of `current` (an update keeps what the flags do not
 * name; PATCH replaces the spec as a whole). The kind follows --worker-image, else the current
 * spec's kind, else a command worker.
 *
 * @example
 * workerFromFlags({ 'worker-image': 'me/sd:1', 'worker-gpus': '1' }, undefined); // { image: 'me/sd:1', gpus: 1 }
 */
export function workerFromFlags(values: WorkerFlags, current: WorkerSpec | undefined): WorkerSpec {
  const image = values['worker-image'] ?? (current && isContainerSpec(current) ? current.image : undefined);
  if (image !== undefined) return containerSpec(image.trim(), values, current && isContainerSpec(current) ? current : undefined);
  return processSpec(values, current && !isContainerSpec(current) ? current : undefined);
}

function processSpec(values: WorkerFlags, current: ProcessWorkerSpec | undefined): ProcessWorkerSpec {
  for (const flag of CONTAINER_ONLY) if (values[flag] !== undefined) throw new UsageError(`--${flag} needs --worker-image`);
  const command = (values['worker-command'] ?? current?.command ?? '').trim();
  if (!command) throw new UsageError('--worker-command must not be empty');
  const worker: ProcessWorkerSpec = { command };
  const env = values['worker-env'] !== undefined ? parseKeyValues('--worker-env', values['worker-env']) : current?.env;
  if (env !== undefined) worker.env = env;
  const cwd = values['worker-cwd'];
  if (cwd !== undefined && !cwd.trim()) throw new UsageError('--worker-cwd must not be empty');
  const newCwd = cwd ?? current?.cwd;
  if (newCwd !== undefined) worker.cwd = newCwd;
  return worker;
}

function containerSpec(image: string, values: WorkerFlags, current: ContainerWorkerSpec | undefined): ContainerWorkerSpec {
  if (!image) throw new UsageError('--worker-image must not be empty');
  if (values['worker-cwd'] !== undefined) throw new UsageError('--worker-cwd is for command workers; a container runs in its image\'s WORKDIR');
  // Another image starts from that image's own settings, apart from what the flags give.
  const base = current?.image === image || values['worker-image'] === undefined ? current : undefined;
  const worker: ContainerWorkerSpec = { image };
  const command = values['worker-command'] !== undefined ? values['worker-command'].trim() : base?.command;
  if (command !== undefined && command !== '') worker.command = command;
  const env = values['worker-env'] !== undefined ? parseKeyValues('--worker-env', values['worker-env']) : base?.env;
  if (env !== undefined) worker.env = env;
  const gpus = values['worker-gpus'] !== undefined ? parseGpus(values['worker-gpus']) : base?.gpus;
  if (gpus !== undefined) worker.gpus = gpus;
  const memory = values['worker-memory-mb'] !== undefined ? parseInteger('--worker-memory-mb', values['worker-memory-mb'], ...MEMORY_MB) : base?.memoryMb;
  if (memory !== undefined) worker.memoryMb = memory;
  const volumes = values['worker-volume'] ?? base?.volumes;
  if (volumes !== undefined) worker.volumes = volumes;
  // The models asked for stay with a count of GPUs (device ids name their devices themselves).
  if (base?.gpuTypes !== undefined && typeof worker.gpus === 'number') worker.gpuTypes = base.gpuTypes;
  const credentials = values['worker-registry-credentials']?.trim() ?? base?.registryCredentials;
  if (credentials === '') throw new UsageError("--worker-registry-credentials must be a credential id, or 'none'");
  if (credentials !== undefined && credentials !== 'none') worker.registryCredentials = credentials;
  const prepull = values['worker-prepull'] !== undefined ? parseBoolean('--worker-prepull', values['worker-prepull']) : base?.prepull;
  if (prepull !== undefined) worker.prepull = prepull;
  return worker;
}

function parseBoolean(flag: string, value: string): boolean {
  if (value === 'true' || value === 'false') return value === 'true';
  throw new UsageError(`${flag} must be true or false, got '${value}'`);
}

/** A count (`2`) or device ids as Docker writes them (`device=0,1`, `device=GPU-3f…`). */
function parseGpus(value: string): number | string[] {
  const trimmed = value.trim();
  if (!trimmed.startsWith('device=')) return parseInteger('--worker-gpus', trimmed, 0, MAX_GPUS);
  const ids = parseList(trimmed.slice('device='.length));
  if (ids.length === 0 || new Set(ids).size !== ids.length) throw new UsageError(`--worker-gpus must be a count or a list of distinct device ids, got '${value}'`);
  return ids;
}

/** A spec as one line: the command, or the image with its GPUs and memory. */
export function describeWorker(spec: WorkerSpec | null): string {
  if (!spec) return '-';
  if (!isContainerSpec(spec)) return spec.command;
  const gpus = spec.gpus === undefined ? '' : ` gpus=${Array.isArray(spec.gpus) ? spec.gpus.join(',') : spec.gpus}`;
  const memory = spec.memoryMb === undefined ? '' : ` memory=${spec.memoryMb}MiB`;
  return `image ${spec.image}${gpus}${memory}`;
}
