#!/usr/bin/env node
/**
 * Top self-time of a V8 .cpuprofile (what `bench:compare -- --profile DIR` leaves for each
 * gateway), by function and by area (node internals, better-sqlite3, pg, src/** folders, GC).
 *
 * usage: node bench/compare/prof-top.js FILE.cpuprofile [--top N]
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

const { values, positionals } = parseArgs({ allowPositionals: true, options: { top: { type: 'string', default: '25' } } });
if (positionals.length === 0) {
  console.error('usage: node bench/compare/prof-top.js FILE.cpuprofile [--top N]');
  process.exit(2);
}

function area(url, name) {
  if (name === '(garbage collector)') return 'GC';
  if (name === '(idle)' || name === '(program)' || name === '(root)') return name;
  if (!url) return 'native / V8 builtins';
  if (url.includes('/src/store/sqlite/')) return 'src/store/sqlite';
  if (url.includes('/src/store/postgres/')) return 'src/store/postgres';
  const m = /\/dist\/src\/([^/]+)\//.exec(url);
  if (m) return `src/${m[1]}`;
  if (url.includes('node_modules/pg')) return 'node_modules/pg*';
  if (url.includes('node_modules/better-sqlite3')) return 'better-sqlite3';
  if (url.includes('node_modules/pino')) return 'pino';
  if (url.startsWith('node:')) return url.split('/')[0].replace(/^node:internal.*/, 'node internals') === 'node internals' ? 'node internals' : url;
  if (url.includes('node_modules/')) return url.replace(/.*node_modules\/((@[^/]+\/)?[^/]+).*/, '$1');
  return 'other';
}

for (const file of positionals) {
  const profile = JSON.parse(readFileSync(file, 'utf8'));
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map();
  const dt = profile.timeDeltas;
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i];
    self.set(id, (self.get(id) ?? 0) + (dt[i] ?? 0));
  }
  const byFn = new Map();
  const byArea = new Map();
  let total = 0;
  let idle = 0;
  for (const [id, us] of self) {
    const n = byId.get(id);
    const { functionName, url, lineNumber } = n.callFrame;
    const name = functionName || '(anonymous)';
    if (name === '(idle)') {
      idle += us;
      continue;
    }
    total += us;
    const key = `${name}  ${url ? `${url.replace(/.*\/(dist|node_modules)\//, '$1/')}:${lineNumber + 1}` : ''}`;
    byFn.set(key, (byFn.get(key) ?? 0) + us);
    const a = area(url, name);
    byArea.set(a, (byArea.get(a) ?? 0) + us);
  }
  const pct = (x) => `${((100 * x) / total).toFixed(1).padStart(5)} %`;
  console.log(`\n${file}: ${(total / 1e6).toFixed(2)} s busy, ${(idle / 1e6).toFixed(2)} s idle`);
  console.log('by area:');
  for (const [a, us] of [...byArea].sort((x, y) => y[1] - x[1]).slice(0, 14)) console.log(`  ${pct(us)}  ${a}`);
  console.log(`top ${values.top} functions by self time:`);
  for (const [f, us] of [...byFn].sort((x, y) => y[1] - x[1]).slice(0, Number(values.top))) console.log(`  ${pct(us)}  ${f}`);
}
