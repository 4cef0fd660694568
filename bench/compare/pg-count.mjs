/**
 * Preload for bench/compare/scale-model.js (`node --import ./bench/compare/pg-count.mjs`):
 * counts the gateway's PostgreSQL round trips (every pg Client#query call: one message
 * exchange, whatever the statement count) and writes the running total to
 * $BENCH_PG_COUNT_FILE every 100 ms and at exit.
 */
import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import process from 'node:process';
import { setInterval } from 'node:timers';

const require = createRequire(join(process.cwd(), 'package.json'));
const pg = require('pg');
const file = process.env.BENCH_PG_COUNT_FILE;
let calls = 0;
const original = pg.Client.prototype.query;
pg.Client.prototype.query = function countedQuery(...args) {
  calls++;
  return original.apply(this, args);
};
const flush = () => {
  if (file) writeFileSync(file, String(calls));
};
setInterval(flush, 100).unref();
process.on('exit', flush);
