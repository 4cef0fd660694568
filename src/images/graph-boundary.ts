import { closeSync, existsSync, fstatSync, linkSync, mkdirSync, openSync, readFileSync, readSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { basename, dirname, join } from 'node:path';
import onnxProto from 'onnx-proto';

/**
 * What a graph file declares at its boundary, read before onnxruntime opens it, and the one
 * rewrite Gantry makes: bfloat16 inputs and outputs, which onnxruntime-node cannot exchange
 * with JS, become float32 with a Cast inside the graph (docs/models.md, "Precision").
 *
 * The skim reads only the protobuf fields it needs with positioned reads, skipping weight
 * bytes, so a 20 GB graph costs a few kilobytes of reading.
 */
const { onnx } = onnxProto;
const DataType = onnx.TensorProto.DataType;

/** Element type names of the ONNX types a boundary may carry. */
const TYPE_NAMES: Record<number, string> = {
  [DataType.FLOAT]: 'float32',
  [DataType.FLOAT16]: 'float16',
  [DataType.BFLOAT16]: 'bfloat16',
  [DataType.DOUBLE]: 'float64',
  [DataType.INT64]: 'int64',
  [DataType.INT32]: 'int32',
  [DataType.INT8]: 'int8',
  [DataType.UINT8]: 'uint8',
  [DataType.BOOL]: 'bool',
};

/** A named input or output and its element type ('float32', 'float16', 'bfloat16', ...). */
export interface BoundaryValue {
  name: string;
  type: string;
}

/** The inputs and outputs of a graph file and the external weight files it names. */
export interface GraphBoundary {
  inputs: BoundaryValue[];
  outputs: BoundaryValue[];
  /** Files beside the graph that hold weights (TensorProto external_data `location`). */
  externalFiles: string[];
  /** Bytes of the graph file plus its external weight files. */
  weightBytes: number;
}

/** Positioned reads of a file through a small window (the skim touches a few KB of it). */
class FileWindow {
  private window = Buffer.alloc(0);
  private windowStart = 0;
  readonly size: number;

  constructor(private readonly fd: number) {
    this.size = fstatSync(fd).size;
  }

  byte(pos: number): number {
    if (pos < this.windowStart || pos >= this.windowStart + this.window.length) {
      this.window = Buffer.alloc(Math.min(65536, this.size - pos));
      this.windowStart = pos;
      readSync(this.fd, this.window, 0, this.window.length, pos);
    }
    return this.window[pos - this.windowStart]!;
  }

  varint(pos: number): [number, number] {
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      const b = this.byte(pos + i);
      value += (b & 0x7f) * scale;
      scale *= 128;
      if ((b & 0x80) === 0) return [value, pos + i + 1];
    }
    throw new Error('malformed protobuf varint');
  }

  text(pos: number, length: number): string {
    const buf = Buffer.alloc(length);
    readSync(this.fd, buf, 0, length, pos);
    return buf.toString('utf8');
  }
}

/** Field visitor: field number, wire type, and for length-delimited fields [start, end). */
type FieldVisitor = (field: number, wire: number, start: number, end: number, value: number) => void;

function forEachField(file: FileWindow, start: number, end: number, visit: FieldVisitor): void {
  let pos = start;
  while (pos < end) {
    const [tag, afterTag] = file.varint(pos);
    const field = Math.floor(tag / 8);
    const wire = tag % 8;
    if (wire === 0) {
      const [value, next] = file.varint(afterTag);
      visit(field, wire, afterTag, next, value);
      pos = next;
    } else if (wire === 2) {
      const [length, dataStart] = file.varint(afterTag);
      visit(field, wire, dataStart, dataStart + length, length);
      pos = dataStart + length;
    } else if (wire === 1 || wire === 5) {
      pos = afterTag + (wire === 1 ? 8 : 4);
    } else {
      throw new Error(`unsupported protobuf wire type ${wire}`);
    }
  }
}

/** ValueInfoProto → name and element type (TypeProto.tensor_type.elem_type). */
function valueInfo(file: FileWindow, start: number, end: number): BoundaryValue {
  let name = '';
  let type = 'unknown';
  forEachField(file, start, end, (field, wire, s, e) => {
    if (field === 1 && wire === 2) name = file.text(s, e - s);
    if (field === 2 && wire === 2) {
      forEachField(file, s, e, (f2, w2, s2, e2) => {
        if (f2 !== 1 || w2 !== 2) return;
        forEachField(file, s2, e2, (f3, w3, _s3, _e3, value) => {
          if (f3 === 1 && w3 === 0) type = TYPE_NAMES[value] ?? `onnx-type-${value}`;
        });
      });
    }
  });
  return { name, type };
}

/** TensorProto → its name and external data location, if it has one. */
function initializer(file: FileWindow, start: number, end: number): { name: string; location: string | null } {
  let location: string | null = null;
  let name = '';
  forEachField(file, start, end, (field, wire, s, e) => {
    if (field === 8 && wire === 2) name = file.text(s, e - s);
    if (field !== 13 || wire !== 2) return;
    let key = '';
    let value = '';
    forEachField(file, s, e, (f2, w2, s2, e2) => {
      if (f2 === 1 && w2 === 2) key = file.text(s2, e2 - s2);
      if (f2 === 2 && w2 === 2) value = file.text(s2, e2 - s2);
    });
    if (key === 'location') location = value;
  });
  return { name, location };
}

/**
 * The boundary of an ONNX graph file: input and output element types, external weight files
 * and the bytes of weights, read without loading the weights.
 *
 * @example readGraphBoundary('/models/flux/transformer/model.onnx').inputs[0] // { name: 'hidden_states', type: 'bfloat16' }
 */
export function readGraphBoundary(path: string): GraphBoundary {
  const fd = openSync(path, 'r');
  try {
    const file = new FileWindow(fd);
    const boundary: GraphBoundary = { inputs: [], outputs: [], externalFiles: [], weightBytes: file.size };
    const initializerNames = new Set<string>();
    forEachField(file, 0, file.size, (field, wire, start, end) => {
      if (field !== 7 || wire !== 2) return; // ModelProto.graph
      forEachField(file, start, end, (f, w, s, e) => {
        if (w !== 2) return;
        if (f === 11) boundary.inputs.push(valueInfo(file, s, e));
        else if (f === 12) boundary.outputs.push(valueInfo(file, s, e));
        else if (f === 5) {
          const { name, location } = initializer(file, s, e);
          if (location !== null && !boundary.externalFiles.includes(location)) boundary.externalFiles.push(location);
          initializerNames.add(name);
        }
      });
    });
    // Older exports list initializers among the inputs too; they are weights, not feeds.
    boundary.inputs = boundary.inputs.filter((input) => !initializerNames.has(input.name));
    for (const location of boundary.externalFiles) {
      const external = join(dirname(path), location);
      if (existsSync(external)) boundary.weightBytes += statSync(external).size;
    }
    return boundary;
  } finally {
    closeSync(fd);
  }
}

/** True when any input or output of the graph is bfloat16 (onnxruntime-node cannot feed or read those). */
export function hasBfloat16Boundary(boundary: GraphBoundary): boolean {
  return [...boundary.inputs, ...boundary.outputs].some((v) => v.type === 'bfloat16');
}

/**
 * The model with every bfloat16 graph input and output turned into float32: a Cast to
 * bfloat16 after each such input, a Cast to float32 before each such output. Inside, the graph
 * is unchanged (its weights and compute stay bfloat16 on the device).
 *
 * @example castBfloat16Boundary(readFileSync('model.onnx'))
 */
export function castBfloat16Boundary(bytes: Uint8Array): Uint8Array {
  const model = onnx.ModelProto.decode(bytes);
  const graph = model.graph;
  if (!graph) throw new Error('ONNX model has no graph');
  const casts: onnxProto.onnx.INodeProto[] = [];
  const renamed = new Map<string, string>();
  const weights = new Set((graph.initializer ?? []).map((t) => t.name));
  for (const input of graph.input ?? []) {
    const tensor = input.type?.tensorType;
    if (tensor?.elemType !== DataType.BFLOAT16 || !input.name || weights.has(input.name)) continue;
    const inner = `${input.name}__gantry_bf16`;
    renamed.set(input.name, inner);
    tensor.elemType = DataType.FLOAT;
    casts.push({ opType: 'Cast', name: `gantry_cast_${input.name}`, input: [input.name], output: [inner], attribute: [{ name: 'to', type: onnx.AttributeProto.AttributeType.INT, i: DataType.BFLOAT16 }] });
  }
  for (const node of graph.node ?? []) {
    node.input = (node.input ?? []).map((name) => renamed.get(name) ?? name);
  }
  const tail: onnxProto.onnx.INodeProto[] = [];
  for (const output of graph.output ?? []) {
    const tensor = output.type?.tensorType;
    if (tensor?.elemType !== DataType.BFLOAT16 || !output.name) continue;
    const inner = `${output.name}__gantry_bf16`;
    for (const node of graph.node ?? []) {
      node.output = (node.output ?? []).map((name) => (name === output.name ? inner : name));
      node.input = (node.input ?? []).map((name) => (name === output.name ? inner : name));
    }
    tensor.elemType = DataType.FLOAT;
    tail.push({ opType: 'Cast', name: `gantry_cast_${output.name}`, input: [inner], output: [output.name], attribute: [{ name: 'to', type: onnx.AttributeProto.AttributeType.INT, i: DataType.FLOAT }] });
  }
  graph.node = [...casts, ...(graph.node ?? []), ...tail];
  return onnx.ModelProto.encode(model).finish();
}

/** Where a float32-boundary copy of a bfloat16 graph can be opened from. */
export type AdaptedGraph = { kind: 'bytes'; bytes: Uint8Array } | { kind: 'file'; path: string };

/**
 * A bfloat16-boundary graph made openable: embedded weights → the rewritten bytes; external
 * weights → a rewritten graph file that onnxruntime accepts beside its weight files (it refuses
 * weights outside the graph's folder, symbolic links included): written next to the original
 * when that folder is writable, else into `cacheDir` with hard links to the weight files.
 *
 * @example const adapted = adaptBfloat16Graph(path, readGraphBoundary(path), '/tmp/gantry-image-cache');
 */
export function adaptBfloat16Graph(path: string, boundary: GraphBoundary, cacheDir: string): AdaptedGraph {
  const bytes = castBfloat16Boundary(readFileSync(path));
  if (boundary.externalFiles.length === 0) return { kind: 'bytes', bytes };
  const beside = join(dirname(path), `${basename(path, '.onnx')}.gantry-float32-io.onnx`);
  if (tryWrite(beside, bytes)) return { kind: 'file', path: beside };
  const stat = statSync(path);
  const key = createHash('sha256').update(`${path}:${stat.size}:${stat.mtimeMs}`).digest('hex').slice(0, 16);
  const dir = join(cacheDir, key);
  mkdirSync(dir, { recursive: true });
  try {
    for (const location of boundary.externalFiles) {
      const target = join(dir, location);
      if (!existsSync(target)) linkSync(join(dirname(path), location), target);
    }
  } catch (err) {
    throw new Error(
      `cannot adapt the bfloat16 graph ${path}: its folder is not writable and its weight files cannot be hard-linked into ${cacheDir} ` +
        `(${(err as Error).message}). Make the folder writable once, set GANTRY_IMAGE_CACHE_DIR to a folder on the same file system, or export with float16/float32 inputs.`,
    );
  }
  const copy = join(dir, basename(path));
  if (!tryWrite(copy, bytes)) throw new Error(`cannot write ${copy}`);
  return { kind: 'file', path: copy };
}

function tryWrite(path: string, bytes: Uint8Array): boolean {
  try {
    const tmp = `${path}.tmp-${process.pid}`;
    writeFileSync(tmp, bytes);
    renameSync(tmp, path);
    return true;
  } catch {
    return false;
  }
}
