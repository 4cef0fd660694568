import { createRequire } from 'node:module';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import ort from 'onnxruntime-node';
import { formatImageDevice, type ImageDevice } from '../config/image-config.js';
import { adaptBfloat16Graph, hasBfloat16Boundary, readGraphBoundary, type GraphBoundary } from './graph-boundary.js';
import { float16DataToFloat32, toHalfBits } from './half-precision.js';

/**
 * onnxruntime-node helpers: sessions on a named device (never a silent CPU fallback), and the
 * one conversion at each graph boundary: feeds in the element type each model input declares
 * (int32 or int64 ids, float32 or float16 tensors, timestep as float or int64), outputs read
 * back as float32 whatever the graph returns (docs/models.md, "Precision").
 */
export type Session = ort.InferenceSession;

/** How a graph is opened: its device, threads, arena, and where adapted bfloat16 graphs may be written. */
export interface SessionSettings {
  device: ImageDevice;
  /** onnxruntime intra-op threads (0: its default, one per core). */
  threads: number;
  /** onnxruntime's CPU memory arena and memory-pattern planning. */
  arena: boolean;
  cacheDir: string;
}

/** The folder holding onnxruntime-node's native binding (and, when installed, its CUDA provider). */
function bindingDir(): string {
  const main = createRequire(import.meta.url).resolve('onnxruntime-node');
  return join(dirname(main), '..', 'bin', 'napi-v6', process.platform, process.arch);
}

/** Memory of one CUDA device as the driver reports it (MiB). */
export interface GpuMemory {
  index: number;
  name: string;
  totalMb: number;
  freeMb: number;
}

/**
 * The CUDA devices this process can see, from nvidia-smi (which ships with the driver), or
 * null when there is no NVIDIA driver.
 *
 * @example listGpus()?.[0]?.freeMb
 */
export function listGpus(): GpuMemory[] | null {
  if (!existsSync('/proc/driver/nvidia/version')) return null;
  let out: string;
  try {
    out = execFileSync('nvidia-smi', ['--query-gpu=index,uuid,name,memory.total,memory.free', '--format=csv,noheader,nounits'], { encoding: 'utf8', timeout: 10_000 });
  } catch {
    return null;
  }
  const all = out.trim().split('\n').filter(Boolean).map((line) => {
    const [index, uuid, name, total, free] = line.split(',').map((part) => part.trim());
    return { index: Number(index), uuid: uuid ?? '', name: name ?? '', totalMb: Number(total), freeMb: Number(free) };
  });
  // nvidia-smi lists every device; CUDA numbers only the visible ones (by index or UUID), in the order given.
  const visible = process.env.CUDA_VISIBLE_DEVICES;
  const chosen = visible === undefined || visible === '' ? all : visible.split(',').map((id) => all.find((g) => String(g.index) === id.trim() || g.uuid === id.trim()));
  // A visible device nvidia-smi does not list by that name (a MIG instance) is there, its memory unknown.
  return chosen.map((g, i) => (g ? { index: i, name: g.name, totalMb: g.totalMb, freeMb: g.freeMb } : { index: i, name: 'unknown', totalMb: NaN, freeMb: NaN }));
}

/**
 * Throws, saying everything that is missing, unless `device` can really run here: CUDA needs
 * an NVIDIA driver with that device, and onnxruntime's CUDA provider library, which
 * `npm install` downloads unless ONNXRUNTIME_NODE_INSTALL=skip (docs/models.md).
 */
export function checkDevice(device: ImageDevice): void {
  const backends = ort.listSupportedBackends().map((b) => b.name);
  if (!backends.includes(device.provider)) throw new Error(`execution provider ${device.provider} is not supported by this onnxruntime-node build (it has: ${backends.join(', ')})`);
  if (device.provider !== 'cuda') return;
  const problems: string[] = [];
  const gpus = listGpus();
  if (gpus === null) problems.push('this machine has no NVIDIA driver (no /proc/driver/nvidia/version, or nvidia-smi fails), so it has no CUDA device');
  else if (device.index >= gpus.length) problems.push(`it has ${gpus.length} visible CUDA device(s), so ${formatImageDevice(device)} does not exist`);
  if (!existsSync(join(bindingDir(), 'libonnxruntime_providers_cuda.so'))) {
    problems.push(`onnxruntime-node's CUDA provider is not installed in ${bindingDir()} (reinstall onnxruntime-node with network access and ONNXRUNTIME_NODE_INSTALL_CUDA=v12)`);
  }
  if (problems.length > 0) {
    throw new Error(`the image worker is set to run on ${formatImageDevice(device)} (GANTRY_IMAGE_PROVIDER=cuda or a cuda device setting), but ${problems.join('; and ')}. No CPU fallback is used: set GANTRY_IMAGE_PROVIDER=cpu to run on the CPU (docs/models.md).`);
  }
}

/** A graph file opened on one device, with what its boundary declared. */
export interface OpenedGraph {
  session: Session;
  boundary: GraphBoundary;
}

/**
 * Opens a graph on exactly one device. A graph with bfloat16 inputs or outputs is opened from
 * a float32-boundary copy (graph-boundary.ts); every other graph as it is.
 */
export async function openGraph(file: string, settings: SessionSettings): Promise<OpenedGraph> {
  const boundary = readGraphBoundary(file);
  const options: ort.InferenceSession.SessionOptions = {
    executionProviders: [settings.device.provider === 'cuda' ? { name: 'cuda', deviceId: settings.device.index } : 'cpu'],
    graphOptimizationLevel: 'all',
    enableCpuMemArena: settings.arena,
    enableMemPattern: settings.arena,
    ...(settings.threads > 0 ? { intraOpNumThreads: settings.threads } : {}),
    extra: {
      // No busy-waiting of idle intra-op threads after a run: on a shared host they would take
      // the CPU from the gateway and the worker's own result post.
      session: { intra_op: { allow_spinning: '0' }, inter_op: { allow_spinning: '0' }, use_device_allocator_for_initializers: '1' },
    },
  };
  if (!hasBfloat16Boundary(boundary)) return { session: await ort.InferenceSession.create(file, options), boundary };
  const adapted = adaptBfloat16Graph(file, boundary, settings.cacheDir);
  const session = adapted.kind === 'bytes' ? await ort.InferenceSession.create(adapted.bytes, options) : await ort.InferenceSession.create(adapted.path, options);
  return { session, boundary };
}

interface InputInfo {
  type: string;
  shape: readonly (number | string)[];
}

/** Declared type and shape of a session input; throws naming the model when it has no such input. */
export function inputInfo(session: Session, name: string, model: string): InputInfo {
  const meta = session.inputMetadata.find((m) => m.name === name);
  if (!meta) throw new Error(`${model} has no input '${name}' (inputs: ${session.inputNames.join(', ')})`);
  return meta.isTensor ? { type: meta.type, shape: meta.shape } : { type: 'float32', shape: [] };
}

/** True when the ONNX session has an input of that name. */
export function hasInput(session: Session, name: string): boolean {
  return session.inputNames.includes(name);
}

/** A tensor for input `name` of `session`, in the element type the model declares. */
export function feed(session: Session, name: string, model: string, values: ArrayLike<number>, dims: number[]): ort.Tensor {
  const { type } = inputInfo(session, name, model);
  switch (type) {
    case 'float32':
      return new ort.Tensor('float32', values instanceof Float32Array ? values : Float32Array.from(values), dims);
    case 'float16':
      return halfTensor(toHalfBits(values), dims);
    case 'int64':
      return new ort.Tensor('int64', BigInt64Array.from(Array.from(values, (v) => BigInt(Math.round(v)))), dims);
    case 'int32':
      return new ort.Tensor('int32', Int32Array.from(Array.from(values, (v) => Math.round(v))), dims);
    default:
      throw new Error(`${model} input '${name}' has unsupported type ${type}`);
  }
}

/**
 * A float16 tensor the native binding can read on every Node version. Where the runtime has
 * Float16Array (Node 24+), onnxruntime-common re-views the bits as one, and onnxruntime-node
 * 1.30's binding does not know that array type: it fails with "not enough space: expected N,
 * got 0". The tensor then gets its bits back as its own `data`, which is what the binding reads.
 */
function halfTensor(bits: Uint16Array, dims: number[]): ort.Tensor {
  const tensor = new ort.Tensor('float16', bits, dims);
  if (!(tensor.data instanceof Uint16Array)) Object.defineProperty(tensor, 'data', { value: bits, enumerable: true });
  return tensor;
}

/** Shape to feed for a per-step scalar input (timestep, guidance): rank 0, [1] or [batch]. */
export function scalarDims(session: Session, name: string, model: string, batch: number): number[] {
  const { shape } = inputInfo(session, name, model);
  if (shape.length === 0) return [];
  const dim = shape[0];
  if (typeof dim === 'number') return [dim];
  return typeof dim === 'string' && dim.includes('batch') ? [batch] : [1];
}

/**
 * The float32 values of an output tensor, converted once whatever the graph returned:
 * float32 as is, float16 from its bytes (a Uint16Array of bits, or a Float16Array on Node 24+).
 */
export function tensorToFloat32(tensor: ort.Tensor, model: string, output: string): Float32Array {
  if (tensor.type === 'float32') return tensor.data as Float32Array;
  if (tensor.type === 'float16') return float16DataToFloat32(tensor.data as unknown as ArrayBufferView);
  throw new Error(`${model} output '${output}' is ${tensor.type}; expected float32 or float16`);
}

/** Runs a session and returns the named output as float32. */
export async function runFloat(session: Session, feeds: Record<string, ort.Tensor>, output: string, model: string): Promise<{ data: Float32Array; dims: readonly number[] }> {
  if (!session.outputNames.includes(output)) throw new Error(`${model} has no output '${output}' (outputs: ${session.outputNames.join(', ')})`);
  const result = await session.run(feeds);
  const tensor = result[output];
  if (!tensor) throw new Error(`${model} returned no '${output}'`);
  return { data: tensorToFloat32(tensor, model, output), dims: tensor.dims };
}
