import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import ort from 'onnxruntime-node';

/**
 * onnxruntime-node helpers: sessions on a named execution provider (never a silent CPU
 * fallback), and feeds converted to the element type each model input declares (exports differ:
 * int32 or int64 ids, float32 or float16 weights, timestep as float or int64).
 */
export type Provider = 'cpu' | 'cuda';
export type Session = ort.InferenceSession;

/** The folder holding onnxruntime-node's native binding (and, when installed, its CUDA provider). */
function bindingDir(): string {
  const main = createRequire(import.meta.url).resolve('onnxruntime-node');
  return join(dirname(main), '..', 'bin', 'napi-v6', process.platform, process.arch);
}

/**
 * Throws unless `provider` can really run here. CUDA needs onnxruntime's CUDA provider library,
 * which `npm install` downloads unless ONNXRUNTIME_NODE_INSTALL=skip (DESIGN.md §4).
 */
export function checkProvider(provider: Provider): void {
  const backends = ort.listSupportedBackends().map((b) => b.name);
  if (!backends.includes(provider)) throw new Error(`execution provider ${provider} is not supported by this onnxruntime-node build (it has: ${backends.join(', ')})`);
  if (provider === 'cuda' && !existsSync(join(bindingDir(), 'libonnxruntime_providers_cuda.so'))) {
    throw new Error(
      `GANTRY_IMAGE_PROVIDER=cuda but onnxruntime-node's CUDA provider is not installed in ${bindingDir()}: ` +
        `reinstall onnxruntime-node with network access and ONNXRUNTIME_NODE_INSTALL_CUDA=v12 (see docs/models.md). No CPU fallback is used.`,
    );
  }
}

/** Opens a model on exactly one execution provider. */
export async function openSession(file: string, provider: Provider, threads: number): Promise<Session> {
  return ort.InferenceSession.create(file, {
    executionProviders: [provider],
    graphOptimizationLevel: 'all',
    ...(threads > 0 ? { intraOpNumThreads: threads } : {}),
    // No busy-waiting of idle intra-op threads after a run: on a shared host they would take
    // the CPU from the gateway and the worker's own result post.
    extra: { session: { intra_op: { allow_spinning: '0' }, inter_op: { allow_spinning: '0' } } },
  });
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
      return new ort.Tensor('float16', toHalf(values), dims);
    case 'int64':
      return new ort.Tensor('int64', BigInt64Array.from(Array.from(values, (v) => BigInt(Math.round(v)))), dims);
    case 'int32':
      return new ort.Tensor('int32', Int32Array.from(Array.from(values, (v) => Math.round(v))), dims);
    default:
      throw new Error(`${model} input '${name}' has unsupported type ${type}`);
  }
}

/** Shape to feed for a per-step scalar input (timestep, guidance): rank 0, [1] or [batch]. */
export function scalarDims(session: Session, name: string, model: string, batch: number): number[] {
  const { shape } = inputInfo(session, name, model);
  if (shape.length === 0) return [];
  const dim = shape[0];
  if (typeof dim === 'number') return [dim];
  return typeof dim === 'string' && dim.includes('batch') ? [batch] : [1];
}

/** Runs a session and returns the named output as float32. */
export async function runFloat(session: Session, feeds: Record<string, ort.Tensor>, output: string, model: string): Promise<{ data: Float32Array; dims: readonly number[] }> {
  if (!session.outputNames.includes(output)) throw new Error(`${model} has no output '${output}' (outputs: ${session.outputNames.join(', ')})`);
  const result = await session.run(feeds);
  const tensor = result[output];
  if (!tensor) throw new Error(`${model} returned no '${output}'`);
  const data = tensor.type === 'float16' ? fromHalf(tensor.data as Uint16Array) : (tensor.data as Float32Array);
  return { data, dims: tensor.dims };
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

function toHalf(values: ArrayLike<number>): Uint16Array {
  const out = new Uint16Array(values.length);
  for (let i = 0; i < values.length; i++) {
    f32[0] = values[i]!;
    const x = u32[0]!;
    const sign = (x >>> 16) & 0x8000;
    const exp = ((x >>> 23) & 0xff) - 127 + 15;
    const mant = x & 0x7fffff;
    if (exp <= 0) out[i] = sign; // underflow to zero (subnormals dropped)
    else if (exp >= 31) out[i] = sign | 0x7c00;
    else out[i] = sign | (exp << 10) | ((mant + 0x1000) >>> 13);
  }
  return out;
}

function fromHalf(values: Uint16Array): Float32Array {
  const out = new Float32Array(values.length);
  for (let i = 0; i < values.length; i++) {
    const h = values[i]!;
    const sign = h & 0x8000 ? -1 : 1;
    const exp = (h >>> 10) & 0x1f;
    const mant = h & 0x3ff;
    out[i] = exp === 0 ? sign * 2 ** -14 * (mant / 1024) : exp === 31 ? (mant ? NaN : sign * Infinity) : sign * 2 ** (exp - 15) * (1 + mant / 1024);
  }
  return out;
}
