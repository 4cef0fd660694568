/**
 * Output of bench/compare: the comparison table (text and Markdown, with ratios), the aims of
 * issue 13 checked as ratios within the run, and a hand-written SVG bar chart.
 */

const fmtRate = (x) => (Number.isFinite(x) ? Math.round(x).toLocaleString('en-US') : '–');
const fmtMs = (x) => (Number.isFinite(x) ? x.toFixed(2) : '–');

/** The rows of the table: metric key, title, unit, and whether higher is better. */
export function metricRows(backlogs) {
  const rows = [
    ['submit', 'submit, 64 in flight', '/s', true],
    ['e2e1', 'end to end, 1 job per submit and per take, 32 in flight', 'jobs/s', true],
    ['e2eBatch', 'end to end, 1 job per submit, batch takes (50)', 'jobs/s', true],
  ];
  for (const n of backlogs) {
    rows.push([`drain${n}`, `backlog ${n.toLocaleString('en-US')}: drain`, 'jobs/s', true]);
    rows.push([`submitWaiting${n}`, `backlog ${n.toLocaleString('en-US')}: submit while it waits`, '/s', true]);
  }
  rows.push(
    ['syncLightP50', 'runsync added p50, 1 caller', 'ms', false],
    ['syncLightP99', 'runsync added p99, 1 caller', 'ms', false],
    ['syncLightMax', 'runsync max, 1 caller', 'ms', false],
    ['syncHeavyP50', 'runsync added p50, 32 callers', 'ms', false],
    ['syncHeavyP99', 'runsync added p99, 32 callers', 'ms', false],
    ['syncHeavyMax', 'runsync max, 32 callers', 'ms', false],
    ['status', 'status reads, 64 in flight', '/s', true],
  );
  return rows.map(([key, title, unit, higher]) => ({ key, title, unit, higher }));
}

const PEERS = ['bullmq', 'pg-boss', 'graphile-worker'];

/** Best peer value of a metric: `{name, value}`. */
function bestPeer(medians, key, higher) {
  let best;
  for (const p of PEERS) {
    const v = medians[p]?.[key];
    if (!Number.isFinite(v)) continue;
    if (!best || (higher ? v > best.value : v < best.value)) best = { name: p, value: v };
  }
  return best;
}

/** Table cells: one column per system, then Gantry ÷ best peer for each backend. */
export function tableCells(result) {
  const systems = result.systems;
  const header = ['scenario', 'unit', ...systems.map((s) => s.name), 'SQLite ÷ best peer', 'PG ÷ best peer'];
  const body = [];
  for (const row of metricRows(result.backlogs)) {
    const cells = [row.title, row.unit];
    let any = false;
    for (const s of systems) {
      const v = result.medians[s.name]?.[row.key];
      if (Number.isFinite(v)) any = true;
      cells.push(row.unit === 'ms' ? fmtMs(v) : fmtRate(v));
    }
    if (!any) continue;
    const best = bestPeer(result.medians, row.key, row.higher);
    for (const g of ['gantry-sqlite', 'gantry-pg']) {
      const v = result.medians[g]?.[row.key];
      if (!best || !Number.isFinite(v)) cells.push('–');
      else if (row.higher) cells.push(`${(v / best.value).toFixed(2)} (${best.name})`);
      else cells.push(`${(best.value > 0 ? v / best.value : Infinity).toFixed(2)} (${best.name}, lower is better)`);
    }
    body.push(cells);
  }
  return { header, body };
}

/** The issue's aims, each as a ratio within this run. */
export function aims(result) {
  const m = result.medians;
  const g = (s, k) => m[s]?.[k];
  const out = [];
  const add = (title, value, target) => {
    if (Number.isFinite(value)) out.push({ title, value, target, met: value >= target });
  };
  const e2eBest = bestPeer(m, 'e2e1', true);
  if (e2eBest) {
    add(`end to end 1 job/call, Gantry SQLite ÷ fastest peer (${e2eBest.name})`, g('gantry-sqlite', 'e2e1') / e2eBest.value, 1);
    add(`end to end 1 job/call, Gantry PostgreSQL ÷ fastest peer (${e2eBest.name})`, g('gantry-pg', 'e2e1') / e2eBest.value, 1);
  }
  const n = result.backlogs[0];
  const drainBest = bestPeer(m, `drain${n}`, true);
  if (drainBest) {
    add(`backlog ${n} drain, Gantry SQLite ÷ fastest peer (${drainBest.name})`, g('gantry-sqlite', `drain${n}`) / drainBest.value, 1);
    add(`backlog ${n} drain, Gantry PostgreSQL ÷ fastest peer (${drainBest.name})`, g('gantry-pg', `drain${n}`) / drainBest.value, 1);
  }
  add('/run SQLite ÷ bare node:http', g('gantry-sqlite', 'submit') / g('node-http', 'submit'), 0.4);
  add('/run PostgreSQL ÷ bare node:http', g('gantry-pg', 'submit') / g('node-http', 'submit'), 0.4);
  add('end to end 1 job/call, PostgreSQL ÷ SQLite', g('gantry-pg', 'e2e1') / g('gantry-sqlite', 'e2e1'), 0.5);
  add('end to end batch, PostgreSQL ÷ SQLite', g('gantry-pg', 'e2eBatch') / g('gantry-sqlite', 'e2eBatch'), 0.5);
  return out;
}

function textTable(header, body) {
  const rows = [header, ...body];
  const widths = header.map((_, i) => Math.max(...rows.map((r) => String(r[i]).length)));
  const lines = rows.map((r) => r.map((c, i) => (i < 2 ? String(c).padEnd(widths[i]) : String(c).padStart(widths[i]))).join('  '));
  lines.splice(1, 0, widths.map((w) => '-'.repeat(w)).join('  '));
  return lines.join('\n');
}

/** The whole report as plain text for the terminal. */
export function renderText(result) {
  const { header, body } = tableCells(result);
  const lines = [
    '',
    `bench/compare — ${result.machine.cpu}, ${result.machine.cores} cores, node ${result.machine.node}; load average at start ${result.loadStart.join(' ')}, at end ${result.loadEnd.join(' ')}`,
    `command: ${result.command}; median of ${result.rounds} run(s); ${result.seconds} s measured per scenario`,
    'Gantry runs as a gateway process over HTTP; the peers run in-process in the load generator (no HTTP hop).',
    '',
    textTable(header, body),
    '',
    'aims (ratios within this run):',
    ...aims(result).map((a) => `  ${a.met ? 'met ' : 'MISS'}  ${a.title}: ${a.value.toFixed(2)} (aim ≥ ${a.target})`),
    '',
  ];
  return lines.join('\n');
}

/** The generated Markdown block for docs/benchmarks-peers.md. */
export function renderMarkdown(result, svgName) {
  const { header, body } = tableCells(result);
  const md = [];
  md.push(`Command: \`${result.command}\` — median of ${result.rounds} run(s), ${result.seconds} s measured per scenario after ${result.warmup} s warm-up; run on ${result.date}.`);
  md.push('');
  md.push(`Machine: ${result.machine.cpu}, ${result.machine.cores} cores, ${result.machine.memoryGiB} GiB, node ${result.machine.node}, PostgreSQL and Redis on the same machine. **Load average (uptime) at start ${result.loadStart.join(' / ')}, at end ${result.loadEnd.join(' / ')}** — a shared, loaded machine: re-run on a quiet one before quoting absolute figures; the ratios within one run are what this page quotes.`);
  md.push('');
  md.push('**Gantry runs as its own gateway process, driven over HTTP** (keep-alive node:http clients, as a remote client of a job API would). **The peers run in-process**, as libraries inside the load-generator process: no HTTP hop, no JSON over the wire, and they share that process\'s core with the load generator.');
  md.push('');
  md.push(`| ${header.join(' | ')} |`);
  md.push(`|${header.map((_, i) => (i < 2 ? '---' : '--:')).join('|')}|`);
  for (const r of body) md.push(`| ${r.join(' | ')} |`);
  md.push('');
  md.push('Aims of issue 13, as ratios within this run:');
  md.push('');
  md.push('| aim | ratio | target | |');
  md.push('|---|--:|--:|---|');
  for (const a of aims(result)) md.push(`| ${a.title} | ${a.value.toFixed(2)} | ≥ ${a.target} | ${a.met ? 'met' : '**missed**'} |`);
  md.push('');
  const rssLines = [];
  for (const s of result.systems) {
    for (const n of result.backlogs) {
      const d = result.rssByBacklog[s.name]?.[n];
      if (d) rssLines.push(`| ${s.name} | ${n.toLocaleString('en-US')} | ${d.start} | ${d.filled} | ${d.max} | ${d.end} |`);
    }
  }
  if (rssLines.length) {
    md.push('Resident memory (MiB) of the process holding the client side of the queue during the backlog runs (first run): the gateway for Gantry, the load-generator process for the in-process peers (whose queue lives in Redis / PostgreSQL):');
    md.push('');
    md.push('| system | backlog | before fill | filled | max | after drain |');
    md.push('|---|--:|--:|--:|--:|--:|');
    md.push(...rssLines);
    md.push('');
  }
  for (const s of result.systems) {
    for (const n of result.backlogs) {
      const c = result.rssByBacklog[s.name]?.[n]?.capped;
      if (c) md.push(`Drain capped: ${s.name} drained ${c.drained.toLocaleString('en-US')} of ${c.total.toLocaleString('en-US')} jobs in the ${c.seconds} s limit (\`--drain-limit\`); its drain figure is the rate over that time.`, '');
    }
  }
  if (svgName) md.push(`![throughput beside the peers](${svgName})`);
  return md.join('\n');
}

const COLORS = { 'gantry-sqlite': '#1f77b4', 'gantry-pg': '#2ca02c', bullmq: '#d62728', 'pg-boss': '#9467bd', 'graphile-worker': '#8c564b', 'node-http': '#7f7f7f' };

/** A grouped horizontal bar chart of the throughput rows, bars scaled per row. */
export function renderSvg(result) {
  const rows = metricRows(result.backlogs).filter((r) => r.higher);
  const systems = result.systems;
  const barH = 11;
  const groupH = systems.length * barH + 14;
  const left = 340;
  const width = 1000;
  const barMax = width - left - 90;
  const height = 40 + rows.length * groupH + 30;
  const esc = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;');
  const out = [`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="11">`];
  out.push(`<rect width="100%" height="100%" fill="white"/>`);
  out.push(`<text x="10" y="18" font-size="13" font-weight="bold">${esc(`Throughput beside the peers (median of ${result.rounds}, load average ${result.loadStart[0]}); bars scaled to the best of each row`)}</text>`);
  systems.forEach((s, i) => {
    out.push(`<rect x="${10 + i * 160}" y="26" width="10" height="10" fill="${COLORS[s.name] ?? '#000'}"/><text x="${24 + i * 160}" y="35">${esc(s.name)}</text>`);
  });
  let y = 50;
  for (const row of rows) {
    const values = systems.map((s) => result.medians[s.name]?.[row.key]);
    const max = Math.max(...values.filter(Number.isFinite), 1);
    out.push(`<text x="${left - 8}" y="${y + groupH / 2}" text-anchor="end">${esc(row.title)}</text>`);
    values.forEach((v, i) => {
      const by = y + i * barH;
      if (!Number.isFinite(v)) {
        out.push(`<text x="${left + 2}" y="${by + 9}" fill="#999">n/a</text>`);
        return;
      }
      const w = Math.max(1, (v / max) * barMax);
      out.push(`<rect x="${left}" y="${by}" width="${w.toFixed(1)}" height="${barH - 2}" fill="${COLORS[systems[i].name] ?? '#000'}"/>`);
      out.push(`<text x="${left + w + 4}" y="${by + 9}">${fmtRate(v)}</text>`);
    });
    y += groupH;
  }
  out.push('</svg>');
  return out.join('\n');
}
