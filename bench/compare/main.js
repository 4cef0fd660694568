#!/usr/bin/env node
/**
 * Gantry beside the job queues people would pick instead (issue 13), in one process tree and
 * one sitting: Gantry on SQLite and on PostgreSQL (gateway child process, over HTTP), BullMQ on
 * Redis, pg-boss and graphile-worker on PostgreSQL (in-process), and a bare node:http server as
 * the machine's ceiling. Median of --rounds runs; prints a table with ratios; writes the
 * generated block of docs/benchmarks-peers.md and docs/benchmarks-peers.svg.
 *
 * usage: npm run bench:compare -- [options]      (builds first; or: node bench/compare/main.js)
 *
 *   --quick            tiny sizes for a fast check: 1 round, 1 s per scenario, backlog 2000
 *   --seconds N        measured seconds per scenario (default 3), after a warm-up of 1 s
 *   --rounds N         runs of the whole matrix; the table gives the median (default 3)
 *   --backlog L        backlog sizes, comma-separated (default 10000,100000): the first runs in
 *                      every round, larger ones in the first round only (e.g. --backlog 10000,1000000)
 *   --drain-limit S    stop a backlog drain after S seconds (default 300) and report the rate so far,
 *                      marked "capped" (pg-boss drains a 1M queue at ~100 jobs/s: hours otherwise)
 *   --systems L        subset of gantry-sqlite,gantry-pg,bullmq,pg-boss,graphile-worker,node-http
 *   --scenarios L      subset of submit,e2e1,e2eBatch,backlog,runsync,status
 *   --profile DIR      run the Gantry gateways under --cpu-prof into DIR/<system>
 *   --doc FILE         Markdown file whose generated block is replaced (default docs/benchmarks-peers.md)
 *   --svg FILE         chart (default docs/benchmarks-peers.svg)
 *   --json FILE        also write every figure and detail as JSON
 *   --no-write         print only; write neither doc nor chart
 *   --from-json FILE   measure nothing: print and write the doc block and chart of a --json result
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { ceilingSystem, gantrySystem } from './gantry.js';
import { loadAverage, median } from './lib.js';
import { bullmqSystem, graphileSystem, pgbossSystem } from './peers.js';
import { renderMarkdown, renderSvg, renderText } from './report.js';
import * as sc from './scenarios.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const ALL_SYSTEMS = ['gantry-sqlite', 'gantry-pg', 'bullmq', 'pg-boss', 'graphile-worker', 'node-http'];
const ALL_SCENARIOS = ['submit', 'e2e1', 'e2eBatch', 'backlog', 'runsync', 'status'];

const { values: flags } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    seconds: { type: 'string' },
    rounds: { type: 'string' },
    backlog: { type: 'string' },
    'drain-limit': { type: 'string', default: '300' },
    systems: { type: 'string', default: ALL_SYSTEMS.join(',') },
    scenarios: { type: 'string', default: ALL_SCENARIOS.join(',') },
    profile: { type: 'string' },
    doc: { type: 'string', default: join(ROOT, 'docs/benchmarks-peers.md') },
    svg: { type: 'string', default: join(ROOT, 'docs/benchmarks-peers.svg') },
    json: { type: 'string' },
    'no-write': { type: 'boolean', default: false },
    'from-json': { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});

function fail(message) {
  console.error(`bench/compare: ${message}`);
  process.exit(2);
}

if (flags.help) {
  const text = readFileSync(fileURLToPath(import.meta.url), 'utf8');
  console.log(text.slice(text.indexOf(' * usage:') + 3, text.indexOf(' */')).replace(/^ \* ?/gm, ''));
  process.exit(0);
}
const SECONDS = Number(flags.seconds ?? (flags.quick ? 1 : 3));
const ROUNDS = Number(flags.rounds ?? (flags.quick ? 1 : 3));
const BACKLOGS = (flags.backlog ?? (flags.quick ? '2000' : '10000,100000')).split(',').map(Number);
const SYSTEMS = flags.systems.split(',').map((s) => s.trim());
const SCENARIOS = flags.scenarios.split(',').map((s) => s.trim());
if (!(SECONDS > 0 && SECONDS <= 60)) fail('--seconds must be a number from 0 to 60');
if (!(Number.isInteger(ROUNDS) && ROUNDS >= 1 && ROUNDS <= 9)) fail('--rounds must be an integer from 1 to 9');
if (!BACKLOGS.every((n) => Number.isInteger(n) && n >= 100 && n <= 10_000_000)) fail('--backlog must be integers from 100 to 10,000,000');
for (const s of SYSTEMS) if (!ALL_SYSTEMS.includes(s)) fail(`unknown system ${s} (expected ${ALL_SYSTEMS.join(', ')})`);
for (const s of SCENARIOS) if (!ALL_SCENARIOS.includes(s)) fail(`unknown scenario ${s} (expected ${ALL_SCENARIOS.join(', ')})`);
const DRAIN_LIMIT = Number(flags['drain-limit']);
if (!(DRAIN_LIMIT >= 10 && DRAIN_LIMIT <= 86_400)) fail('--drain-limit must be seconds from 10 to 86400');
const OPTS = { seconds: SECONDS, warmup: flags.quick ? 0.3 : 1, waitSeconds: flags.quick ? 1 : 3, drainLimitSeconds: DRAIN_LIMIT };

const log = (m) => process.stderr.write(`${m}\n`);

function makeSystem(name) {
  const profileDir = flags.profile ? join(resolve(flags.profile), name) : undefined;
  if (profileDir) mkdirSync(profileDir, { recursive: true });
  switch (name) {
    case 'gantry-sqlite':
      return gantrySystem('sqlite', { profileDir });
    case 'gantry-pg':
      return gantrySystem('postgres', { profileDir });
    case 'bullmq':
      return bullmqSystem();
    case 'pg-boss':
      return pgbossSystem();
    case 'graphile-worker':
      return graphileSystem();
    default:
      return ceilingSystem();
  }
}

/** One system, one round: every scenario it supports. Returns `{figures, details}`. */
let current;

async function runSystem(name, round) {
  const sys = makeSystem(name);
  current = sys;
  const figures = {};
  const details = { loadAverage: loadAverage() };
  const merge = (r) => {
    Object.assign(figures, r.figures);
    Object.assign(details, r.details);
  };
  const want = (s) => SCENARIOS.includes(s);
  try {
    await sys.start();
    let ids = [];
    if (want('submit') || want('status')) {
      const r = await sc.submit(sys, OPTS);
      ids = r.ids;
      if (want('submit')) merge(r);
    }
    if (want('status')) merge(await sc.status(sys, OPTS, ids));
    if (!sys.ceiling) {
      if (want('e2e1')) merge(await sc.endToEnd(sys, OPTS, 1));
      if (want('e2eBatch')) merge(await sc.endToEnd(sys, OPTS, 50));
      if (want('runsync')) merge(await sc.runsync(sys, OPTS));
      if (want('backlog')) {
        for (const n of round === 0 ? BACKLOGS : BACKLOGS.slice(0, 1)) {
          log(`  ${name}: backlog ${n}`);
          merge(await sc.backlog(sys, OPTS, n, log));
        }
      }
    }
  } finally {
    await sys.stop();
  }
  return { label: sys.label, figures, details };
}

function writeDoc(result) {
  const svgName = basename(flags.svg);
  writeFileSync(flags.svg, `${renderSvg(result)}\n`);
  const block = `<!-- bench:compare begin (generated by npm run bench:compare; edits inside are overwritten) -->\n${renderMarkdown(result, svgName)}\n<!-- bench:compare end -->`;
  let text = existsSync(flags.doc) ? readFileSync(flags.doc, 'utf8') : '# Beside the peers\n\n';
  const re = /<!-- bench:compare begin[\s\S]*?<!-- bench:compare end -->/;
  text = re.test(text) ? text.replace(re, () => block) : `${text.trimEnd()}\n\n${block}\n`;
  writeFileSync(flags.doc, text);
  log(`wrote ${flags.doc} and ${flags.svg}`);
}

async function main() {
  if (flags['from-json']) {
    const saved = JSON.parse(readFileSync(flags['from-json'], 'utf8'));
    process.stdout.write(`${renderText(saved)}\n`);
    if (!flags['no-write']) writeDoc(saved);
    return;
  }
  const started = Date.now();
  const loadStart = loadAverage();
  const perRound = [];
  for (let round = 0; round < ROUNDS; round++) {
    const figures = {};
    for (const name of SYSTEMS) {
      log(`round ${round + 1}/${ROUNDS}: ${name} (load average ${loadAverage().join(' ')}, ${Math.round((Date.now() - started) / 1000)} s elapsed)`);
      figures[name] = await runSystem(name, round);
    }
    perRound.push(figures);
  }
  const medians = {};
  for (const name of SYSTEMS) {
    medians[name] = {};
    const keys = new Set(perRound.flatMap((r) => Object.keys(r[name].figures)));
    for (const k of keys) medians[name][k] = median(perRound.map((r) => r[name].figures[k]));
  }
  const rssByBacklog = {};
  for (const name of SYSTEMS) {
    rssByBacklog[name] = {};
    for (const n of BACKLOGS) {
      const d = perRound[0][name].details[`backlog${n}`];
      if (d) rssByBacklog[name][n] = { start: d.rss[0]?.[1], filled: d.rssFilledMiB, max: d.rssMaxMiB, end: d.rssEndMiB, ...(d.capped ? { capped: { drained: d.drained, total: d.total, seconds: d.drainSeconds } } : {}) };
    }
  }
  const cpus = os.cpus();
  const result = {
    command: `npm run bench:compare${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`,
    date: new Date().toISOString().slice(0, 16).replace('T', ' ') + ' UTC',
    rounds: ROUNDS,
    seconds: SECONDS,
    warmup: OPTS.warmup,
    backlogs: BACKLOGS,
    machine: { cpu: cpus[0]?.model.trim() ?? 'unknown', cores: cpus.length, memoryGiB: Math.round(os.totalmem() / 2 ** 30), node: process.version },
    loadStart,
    loadEnd: loadAverage(),
    elapsedSeconds: Math.round((Date.now() - started) / 1000),
    systems: SYSTEMS.map((name) => ({ name, label: perRound[0][name].label })),
    medians,
    rssByBacklog,
    perRound,
  };
  process.stdout.write(`${renderText(result)}\n(${result.elapsedSeconds} s in all)\n`);
  if (flags.json) writeFileSync(flags.json, `${JSON.stringify(result, null, 1)}\n`);
  if (!flags['no-write']) writeDoc(result);
}

// Dropping a run's database (WITH FORCE) ends the connections a peer library may still hold
// idle; its pool then emits 57P01 with no listener. That ends nothing of ours: note and go on.
process.on('uncaughtException', (err) => {
  if (err?.code === '57P01') {
    log(`  (a closed pool saw its connection ended: ${err.message})`);
    return;
  }
  console.error(`bench/compare: ${err?.stack ?? err}`);
  process.exit(1);
});

// Interrupted: the running system's gateway process, database or Redis keys go too.
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    log(`bench/compare: ${signal}, stopping ${current?.name ?? 'nothing'}`);
    Promise.resolve(current?.stop())
      .catch(() => {})
      .finally(() => process.exit(130));
  });
}

const hardStop = setTimeout(() => {
  console.error('bench/compare: time limit (60 min; 3 h with a backlog over 100k) reached, giving up');
  process.exit(1);
}, 60 * 60_000 * (BACKLOGS.some((n) => n > 100_000) ? 3 : 1));
hardStop.unref();

main().then(
  () => process.exit(0),
  (err) => {
    console.error(`bench/compare: ${err instanceof Error ? err.stack : String(err)}`);
    process.exit(1);
  },
);
