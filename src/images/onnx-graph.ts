import onnxProto from 'onnx-proto';
import { toBfloat16Bits, toHalfBits } from './half-precision.js';
import { createUniform } from './random.js';

/**
 * A small builder for ONNX graphs written with `onnx-proto` (no Python, no downloads): the
 * tiny demo models are made of a few Gather / MatMul / Conv / Resize nodes with deterministic
 * weights, in the precision a real export comes in (GraphPrecision).
 */
const { onnx } = onnxProto;
const DT = onnx.TensorProto.DataType;
const FLOAT = DT.FLOAT;
const INT64 = DT.INT64;

/** A tensor dimension: a size, or a symbolic name. */
export type Dim = number | string;
/** The tensor element types the tiny models use. */
export type ElemType = 'float32' | 'float16' | 'bfloat16' | 'int64' | 'int32';

const ELEM: Record<ElemType, number> = { float32: FLOAT, float16: DT.FLOAT16, bfloat16: DT.BFLOAT16, int64: INT64, int32: DT.INT32 };

/**
 * How a graph stores and computes floats, as real exports do:
 * - float32, float16: weights, inputs, outputs and arithmetic in that type (on CPU onnxruntime
 *   inserts casts around float16 nodes it has no kernel for);
 * - bfloat16: weights, inputs and outputs in bfloat16, arithmetic in float32 (onnxruntime's CPU
 *   provider has no bfloat16 MatMul or Conv; on a GPU a real bfloat16 export computes in it);
 * - qdq-int8: float32 boundary, int8 weights behind DequantizeLinear and activations through
 *   QuantizeLinear → DequantizeLinear pairs (the QDQ format of onnxruntime's static quantizer).
 */
export type GraphPrecision = 'float32' | 'float16' | 'bfloat16' | 'qdq-int8';

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

/** Builds an ONNX graph node by node (the tiny demo models, src/images/tiny-models.ts). */
export class GraphBuilder {
  private readonly nodes: onnxProto.onnx.INodeProto[] = [];
  private readonly initializers: onnxProto.onnx.ITensorProto[] = [];
  private readonly inputs: onnxProto.onnx.IValueInfoProto[] = [];
  private readonly outputs: onnxProto.onnx.IValueInfoProto[] = [];
  private counter = 0;

  constructor(private readonly name: string, readonly precision: GraphPrecision = 'float32') {}

  /** Element type of float inputs, outputs and weights as stored. */
  get storageType(): ElemType {
    return this.precision === 'float16' ? 'float16' : this.precision === 'bfloat16' ? 'bfloat16' : 'float32';
  }

  /** The ONNX data type arithmetic runs in (for Cast nodes inside the graph). */
  get computeType(): number {
    return this.precision === 'float16' ? DT.FLOAT16 : FLOAT;
  }

  input(name: string, type: ElemType, shape: Dim[]): string {
    this.inputs.push(valueInfo(name, type, shape));
    return name;
  }

  /** A float input in the storage type; returns the name of its value in the compute type. */
  floatInput(name: string, shape: Dim[]): string {
    this.input(name, this.storageType, shape);
    return this.precision === 'bfloat16' ? this.op('Cast', [name], { to: FLOAT }) : name;
  }

  output(name: string, type: ElemType, shape: Dim[]): void {
    this.outputs.push(valueInfo(name, type, shape));
  }

  /** Makes `value` (compute type) the float output `name` in the storage type. */
  floatOutput(name: string, value: string, shape: Dim[]): void {
    if (this.precision === 'bfloat16') this.op('Cast', [value], { to: DT.BFLOAT16 }, name);
    else this.op('Identity', [value], {}, name);
    this.output(name, this.storageType, shape);
  }

  /**
   * A float weight; `data` defaults to deterministic weights of the given scale. Stored in the
   * graph's precision and returned in its compute type (Cast or DequantizeLinear as needed).
   */
  constant(name: string, dims: number[], data: Float32Array | number): string {
    const count = dims.reduce((a, b) => a * b, 1);
    const values = typeof data === 'number' ? weights(`${this.name}/${name}`, count, data) : data;
    if (values.length !== count) throw new Error(`constant ${name}: ${values.length} values for dims ${dims.join('x')}`);
    switch (this.precision) {
      case 'float32':
        return this.float32(name, dims, values);
      case 'float16':
        return this.raw(name, dims, DT.FLOAT16, toHalfBits(values));
      case 'bfloat16':
        return this.op('Cast', [this.raw(`${name}_bf16`, dims, DT.BFLOAT16, toBfloat16Bits(values))], { to: FLOAT });
      case 'qdq-int8':
        return this.int8(name, dims, values);
    }
  }

  /** A float32 initializer whatever the precision (operands that must be float, e.g. Resize scales). */
  float32(name: string, dims: number[], values: Float32Array): string {
    return this.raw(name, dims, FLOAT, values);
  }

  /** In qdq-int8 graphs, QuantizeLinear → DequantizeLinear on an activation in [-range, range]; else `x`. */
  qdq(x: string, range: number): string {
    if (this.precision !== 'qdq-int8') return x;
    const scale = this.float32(`${x}_scale`, [], new Float32Array([range / 127]));
    const zero = this.raw(`${x}_zero`, [], DT.INT8, new Int8Array([0]));
    return this.op('DequantizeLinear', [this.op('QuantizeLinear', [x, scale, zero]), scale, zero]);
  }

  private raw(name: string, dims: number[], dataType: number, values: ArrayBufferView): string {
    this.initializers.push({ name, dims, dataType, rawData: new Uint8Array(values.buffer, values.byteOffset, values.byteLength) });
    return name;
  }

  /** Symmetric per-tensor int8 weights behind a DequantizeLinear. */
  private int8(name: string, dims: number[], values: Float32Array): string {
    let max = 0;
    for (const v of values) max = Math.max(max, Math.abs(v));
    const scale = max > 0 ? max / 127 : 1;
    const q = Int8Array.from(values, (v) => Math.max(-127, Math.min(127, Math.round(v / scale))));
    const quantized = this.raw(`${name}_int8`, dims, DT.INT8, q);
    return this.op('DequantizeLinear', [quantized, this.float32(`${name}_scale`, [], new Float32Array([scale])), this.raw(`${name}_zero`, [], DT.INT8, new Int8Array([0]))]);
  }

  /** A rank-0 int64 initializer (Range and scalar Gather indices take scalars). */
  scalar(name: string, value: number): string {
    const data = new BigInt64Array([BigInt(value)]);
    this.initializers.push({ name, dims: [], dataType: INT64, rawData: new Uint8Array(data.buffer) });
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
