/**
 * 16-bit floats at the JS side of a graph boundary (docs/models.md, "Precision").
 *
 * onnxruntime-node stores a float16 tensor's data as a Uint16Array of IEEE half bit patterns
 * where the runtime has no Float16Array (Node 20, 22), and as a Float16Array of numbers where
 * it has one (Node 24+). Both views hold the same bytes, so this module always reads and writes
 * the bytes, never the elements: one conversion per boundary, the same on every Node version.
 * bfloat16 has no JS tensor type in onnxruntime-node at all; its graphs are adapted to float32
 * inputs and outputs instead (graph-boundary.ts), and these helpers only build test weights.
 */

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** float32 → IEEE half bits, round to nearest even, with subnormals, ±Inf on overflow. */
function halfBits(value: number): number {
  f32[0] = value;
  const x = u32[0]!;
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  const e = exp - 112; // rebias 127 → 15
  if (e >= 31) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    const half = 2 ** (shift - 1);
    let h = Math.floor(mant / 2 ** shift);
    const rest = mant - h * 2 ** shift;
    if (rest > half || (rest === half && h & 1)) h++;
    return sign | h;
  }
  let h = (e << 10) | (mant >>> 13);
  const rest = mant & 0x1fff;
  // A carry out of the mantissa moves into the exponent, as it should (the largest half + ulp is Inf).
  if (rest > 0x1000 || (rest === 0x1000 && h & 1)) h++;
  return sign | h;
}

let halfTable: Float32Array | null = null;

/** The float value of every half bit pattern, computed once (256 KB). */
function halfValues(): Float32Array {
  if (halfTable) return halfTable;
  const table = new Float32Array(65536);
  for (let h = 0; h < 65536; h++) {
    const sign = h & 0x8000 ? -1 : 1;
    const exp = (h >>> 10) & 0x1f;
    const mant = h & 0x3ff;
    table[h] = exp === 0 ? sign * 2 ** -24 * mant : exp === 31 ? (mant ? NaN : sign * Infinity) : sign * 2 ** (exp - 15) * (1 + mant / 1024);
  }
  halfTable = table;
  return table;
}

/**
 * IEEE half bit patterns of `values` (what a float16 tensor holds).
 *
 * @example toHalfBits([1, 0.5])  // Uint16Array [0x3c00, 0x3800]
 */
export function toHalfBits(values: ArrayLike<number>): Uint16Array {
  const out = new Uint16Array(values.length);
  for (let i = 0; i < values.length; i++) out[i] = halfBits(values[i]!);
  return out;
}

/**
 * float32 values of IEEE half bit patterns.
 *
 * @example halfBitsToFloat32(new Uint16Array([0x3c00]))[0] === 1
 */
export function halfBitsToFloat32(bits: Uint16Array): Float32Array {
  const table = halfValues();
  const out = new Float32Array(bits.length);
  for (let i = 0; i < bits.length; i++) out[i] = table[bits[i]!]!;
  return out;
}

/**
 * float32 values of a float16 tensor's data as onnxruntime hands it out: a Uint16Array of bits
 * or a Float16Array (Node 24+). The bits are read from the underlying bytes, so a Float16Array
 * is never decoded a second time.
 *
 * @example float16DataToFloat32(tensor.data as ArrayBufferView)
 */
export function float16DataToFloat32(data: ArrayBufferView): Float32Array {
  if (data.byteLength % 2 !== 0) throw new TypeError(`float16 data of ${data.byteLength} bytes: not a whole number of halves`);
  return halfBitsToFloat32(new Uint16Array(data.buffer, data.byteOffset, data.byteLength / 2));
}

/**
 * bfloat16 bit patterns of `values` (round to nearest even): the upper half of each float32.
 *
 * @example toBfloat16Bits([1])[0] === 0x3f80
 */
export function toBfloat16Bits(values: ArrayLike<number>): Uint16Array {
  const out = new Uint16Array(values.length);
  for (let i = 0; i < values.length; i++) {
    f32[0] = values[i]!;
    const x = u32[0]!;
    if ((x & 0x7f800000) === 0x7f800000 && x & 0x7fffff) {
      out[i] = (x >>> 16) | 0x40; // NaN stays NaN
      continue;
    }
    out[i] = (x + 0x7fff + ((x >>> 16) & 1)) >>> 16;
  }
  return out;
}

/**
 * float32 values of bfloat16 bit patterns.
 *
 * @example bfloat16BitsToFloat32(new Uint16Array([0x3f80]))[0] === 1
 */
export function bfloat16BitsToFloat32(bits: Uint16Array): Float32Array {
  const out = new Float32Array(bits.length);
  const words = new Uint32Array(out.buffer);
  for (let i = 0; i < bits.length; i++) words[i] = bits[i]! << 16;
  return out;
}
