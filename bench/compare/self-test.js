#!/usr/bin/env node
/**
 * Self-test of the comparison harness (`npm run bench:test`): runs bench/compare/main.js with
 * tiny sizes against every system and checks that it ends by itself, that every system produced
 * its figures, that every backlog job was drained, and that the doc block and chart were written
 * (replacing an earlier block, keeping the hand-written text around it). Says nothing about speed.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const dir = mkdtempSync(join(os.tmpdir(), 'gantry-compare-test-'));
const doc = join(dir, 'peers.md');
const svg = join(dir, 'peers.svg');
const json = join(dir, 'result.json');
const problems = [];
const check = (ok, what) => {
  if (!ok) problems.push(what);
};

writeFileSync(doc, '# Hand-written title\n\nkept above\n\n<!-- bench:compare begin -->\nOLD BLOCK\n<!-- bench:compare end -->\n\nkept below\n');
const t0 = Date.now();
const run = spawnSync(process.execPath, [join(ROOT, 'bench/compare/main.js'), '--quick', '--seconds', '0.5', '--backlog', '300', '--doc', doc, '--svg', svg, '--json', json], {
  cwd: ROOT,
  encoding: 'utf8',
  timeout: 600_000,
});
const seconds = Math.round((Date.now() - t0) / 1000);
check(run.status === 0, `main.js exited with ${run.status} ${run.signal ?? ''}: ${run.stderr.slice(-2000)}`);

if (run.status === 0) {
  const result = JSON.parse(readFileSync(json, 'utf8'));
  const systems = ['gantry-sqlite', 'gantry-pg', 'bullmq', 'pg-boss', 'graphile-worker', 'node-http'];
  for (const s of systems) {
    const f = result.medians[s];
    check(f && f.submit > 0, `${s}: no submit figure`);
    check(f && f.status > 0, `${s}: no status figure`);
    if (s === 'node-http') continue;
    check(f.e2e1 > 0, `${s}: no end-to-end figure`);
    check(f.drain300 > 0, `${s}: no drain figure`);
    check(f.syncLightP50 >= -1 && Number.isFinite(f.syncHeavyMax), `${s}: no runsync latency`);
    const b = result.perRound[0][s].details.backlog300;
    check(b && b.drained >= b.total - 0 && b.total >= 300, `${s}: backlog not drained (${b?.drained} of ${b?.total})`);
    check(b && b.rss.length > 0 && b.rss.every(([, v]) => Number.isFinite(v)), `${s}: no RSS samples`);
    if (s !== 'bullmq') check(f.e2eBatch > 0, `${s}: no batch end-to-end figure`);
  }
  check(run.stdout.includes('SQLite ÷ best peer') && run.stdout.includes('aims (ratios within this run)'), 'printed table lacks ratios or aims');
  const text = readFileSync(doc, 'utf8');
  check(text.startsWith('# Hand-written title') && text.includes('kept above') && text.includes('kept below'), 'hand-written text around the block was not kept');
  check(!text.includes('OLD BLOCK') && text.split('<!-- bench:compare begin').length === 2, 'the old generated block was not replaced exactly once');
  check(text.includes('| submit, 64 in flight |') && text.includes('in-process'), 'doc block lacks the table or the in-process note');
  check(readFileSync(svg, 'utf8').startsWith('<svg') && readFileSync(svg, 'utf8').includes('</svg>'), 'chart is not an SVG');
}

rmSync(dir, { recursive: true, force: true });
if (problems.length) {
  console.error(`bench:test FAILED after ${seconds} s:\n - ${problems.join('\n - ')}`);
  process.exit(1);
}
console.log(`bench:test ok: every system measured, backlogs drained, doc and chart written (${seconds} s)`);
