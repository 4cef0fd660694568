import { randomFillSync } from 'node:crypto';

/**
 * Job ids: UUID version 7 (RFC 9562) — a 48-bit millisecond timestamp, then random bits, in
 * the ordinary UUID text form. Time-ordered ids land at the right edge of the primary-key
 * index instead of on a random page, which keeps inserts cheap as the table grows (a random
 * UUIDv4 dirtied one extra index page per job in a group commit). Ids created in the same
 * millisecond by one process stay in order through a 12-bit counter in `rand_a`.
 */
const pool = Buffer.alloc(16 * 256);
let poolAt = pool.length;
let lastMs = 0;
let counter = 0;
const HEX: string[] = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

/** @example uuidv7() // '019a8f3c-2b7e-7c41-9d2a-5f0c8e1b3a77' */
export function uuidv7(now = Date.now()): string {
  if (poolAt + 16 > pool.length) {
    randomFillSync(pool);
    poolAt = 0;
  }
  const b = pool.subarray(poolAt, poolAt + 16);
  poolAt += 16;
  if (now > lastMs) {
    lastMs = now;
    counter = b[6]! & 0x07; // start low so a busy millisecond has room to count
  } else {
    now = lastMs;
    counter++;
    if (counter > 0xfff) {
      // 4096 ids in one millisecond: borrow the next millisecond.
      lastMs = now = lastMs + 1;
      counter = 0;
    }
  }
  b[0] = Math.floor(now / 2 ** 40) & 0xff;
  b[1] = Math.floor(now / 2 ** 32) & 0xff;
  b[2] = (now >>> 24) & 0xff;
  b[3] = (now >>> 16) & 0xff;
  b[4] = (now >>> 8) & 0xff;
  b[5] = now & 0xff;
  b[6] = 0x70 | (counter >>> 8);
  b[7] = counter & 0xff;
  b[8] = (b[8]! & 0x3f) | 0x80;
  let s = '';
  for (let i = 0; i < 16; i++) {
    s += HEX[b[i]!]!;
    if (i === 3 || i === 5 || i === 7 || i === 9) s += '-';
  }
  return s;
}
