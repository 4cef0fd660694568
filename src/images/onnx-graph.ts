import onnxProto from 'onnx-proto';
import { createUniform } from './random.js';

/**
 * A small builder for ONNX graphs written with `onnx-proto` (no Python, no downloads): the
 * tiny demo models are made of a few Gather / MatMul / Conv / Resize nodes with deterministic
 * weights.
 */
const { onnx } = onnxProto;
const FLOAT = onnx.TensorProto.DataType.FLOAT;
const INT64 = onnx.TensorProto.DataType.INT64;

export type Dim = number | string;
export type ElemType = 'float32' | 'int64' | 'int32';

const ELEM: Record<ElemType, number> = { float32: FLOAT, int64: INT64, int32: onnx.TensorProto.DataType.INT32 };

type AttrValue = number | number[] | string;

/** Deterministic weights: uniform in [-scale, scale), seeded from a name. */
export function weights(name: string, count: number, scale: number): Float32Array {
  let seed = 0;
  for (const ch of name) seed = (Math.imul(seed, 31) + ch.charCodeAt(0)) | 0;
  const next = createUniform(seed);
  const out = new Float32Array(count);
  for (let i = 0; i < count; i++) out[i] = (next() * 2 - 1) * scale;
  return out;
}

export class GraphBuilder {
  private readonly nodes: onnxProto.onnx.INodeProto[] = [];
  private readonly initializers: onnxProto.onnx.ITensorProto[] = [];
  private readonly inputs: onnxProto.onnx.IValueInfoProto[] = [];
  private readonly outputs: onnxProto.onnx.IValueInfoProto[] = [];
  private counter = 0;

  constructor(private readonly name: string) {}

  input(name: string, type: ElemType, shape: Dim[]): string {
    this.inputs.push(valueInfo(name, type, shape));
    return name;
  }

  output(name: string, type: ElemType, shape: Dim[]): void {
    this.outputs.push(valueInfo(name, type, shape));
  }

  /** A float initializer; `data` defaults to deterministic weights of the given scale. */
  constant(name: string, dims: number[], data: Float32Array | number): string {
    const count = dims.reduce((a, b) => a * b, 1);
    const values = typeof data === 'number' ? weights(`${this.name}/${name}`, count, data) : data;
    if (values.length !== count) throw new Error(`constant ${name}: ${values.length} values for dims ${dims.join('x')}`);
    this.initializers.push({ name, dims, dataType: FLOAT, rawData: new Uint8Array(values.buffer, values.byteOffset, values.byteLength) });
    return name;
  }

  ints(name: string, values: number[]): string {
    const data = new BigInt64Array(values.map((v) => BigInt(v)));
    this.initializers.push({ name, dims: [values.length], dataType: INT64, rawData: new Uint8Array(data.buffer) });
    return name;
  }

  /** Adds a node; returns its output name (`out`, or a fresh one). */
  op(opType: string, inputs: string[], attrs: Record<string, AttrValue> = {}, out?: string): string {
    const output = out ?? `${opType.toLowerCase()}_${++this.counter}`;
    this.nodes.push({ opType, input: inputs, output: [output], name: `${opType}_${this.counter}_${output}`, attribute: Object.entries(attrs).map(([k, v]) => attribute(k, v)) });
    return output;
  }

  /** The serialized model (opset 17, IR 8). */
  encode(): Uint8Array {
    const model = onnx.ModelProto.create({
      irVersion: 8,
      producerName: 'gantry-tiny-models',
      producerVersion: '1',
      opsetImport: [{ domain: '', version: 17 }],
      graph: { name: this.name, node: this.nodes, initializer: this.initializers, input: this.inputs, output: this.outputs },
    });
    return onnx.ModelProto.encode(model).finish();
  }
}

function valueInfo(name: string, type: ElemType, shape: Dim[]): onnxProto.onnx.IValueInfoProto {
  return {
    name,
    type: { tensorType: { elemType: ELEM[type], shape: { dim: shape.map((d) => (typeof d === 'number' ? { dimValue: d } : { dimParam: d })) } } },
  };
}

function attribute(name: string, value: AttrValue): onnxProto.onnx.IAttributeProto {
  const T = onnx.AttributeProto.AttributeType;
  if (typeof value === 'string') return { name, type: T.STRING, s: new TextEncoder().encode(value) };
  if (Array.isArray(value)) return { name, type: T.INTS, ints: value };
  if (Number.isInteger(value)) return { name, type: T.INT, i: value };
  return { name, type: T.FLOAT, f: value };
}
