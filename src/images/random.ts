/**
 * Seeded normal noise for the initial latents: the same seed gives the same image on every
 * machine (the JS PRNG does not depend on the execution provider).
 */

/** Largest seed a random pick returns (seeds the user gives may be any safe integer). */
export const MAX_RANDOM_SEED = 2 ** 32 - 1;

const MASK64 = (1n << 64n) - 1n;

/** splitmix64: spreads any 64-bit seed into well-mixed state words. */
function splitmix64(state: bigint): [bigint, bigint] {
  const next = (state + 0x9e3779b97f4a7c15n) & MASK64;
  let z = next;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK64;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK64;
  return [next, z ^ (z >> 31n)];
}

/**
 * A xoshiro128** generator seeded from an integer (negative seeds are read as 64-bit two's
 * complement), returning floats in [0, 1).
 *
 * @example const next = createUniform(42); next() === createUniform(42)()
 */
export function createUniform(seed: number): () => number {
  let state = BigInt.asUintN(64, BigInt(seed));
  const s = new Uint32Array(4);
  for (let i = 0; i < 2; i++) {
    const [next, out] = splitmix64(state);
    state = next;
    s[2 * i] = Number(out & 0xffffffffn);
    s[2 * i + 1] = Number(out >> 32n);
  }
  if ((s[0]! | s[1]! | s[2]! | s[3]!) === 0) s[0] = 1;
  return () => {
    const result = Math.imul(rotl(Math.imul(s[1]!, 5), 7), 9) >>> 0;
    const t = (s[1]! << 9) >>> 0;
    s[2]! ^= s[0]!;
    s[3]! ^= s[1]!;
    s[1]! ^= s[2]!;
    s[0]! ^= s[3]!;
    s[2]! ^= t;
    s[3] = rotl(s[3]!, 11);
    return result / 4294967296;
  };
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}

/**
 * `count` standard normal values (Box-Muller) from `seed`.
 *
 * @example gaussianNoise(7, 4).length === 4
 */
export function gaussianNoise(seed: number, count: number): Float32Array {
  const next = createUniform(seed);
  const out = new Float32Array(count);
  for (let i = 0; i < count; i += 2) {
    const u1 = 1 - next(); // (0, 1]: log never sees 0
    const u2 = next();
    const r = Math.sqrt(-2 * Math.log(u1));
    out[i] = r * Math.cos(2 * Math.PI * u2);
    if (i + 1 < count) out[i + 1] = r * Math.sin(2 * Math.PI * u2);
  }
  return out;
}
