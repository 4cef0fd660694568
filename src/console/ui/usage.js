/* global URLSearchParams, getComputedStyle, document, ResizeObserver */
import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import { api } from './api.js';
import { ErrorBox, ms } from './common.js';
import { html } from './html.js';

const DAY = 86_400_000;
const isoDay = (t) => new Date(t).toISOString().slice(0, 10);
const cssVar = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim() || '#888';
const PALETTE = ['--accent', '--ok', '--warn', '--danger', '--fg'];
const MEASURES = [
  ['cost', 'Cost (USD)'],
  ['executionSeconds', 'Execution seconds'],
  ['workerSeconds', 'Worker seconds'],
  ['jobs', 'Jobs'],
];

/** A row's name in the chart and table: the key's name (or id), or the endpoint id. */
const nameOf = (row, by) => (by === 'key' ? (row.key === null ? '(console session)' : row.keyName || `(deleted) ${row.key}`) : row.endpoint);

/** The days of [from, to) as YYYY-MM-DD, for the chart's x axis (every day shown, used or not). */
function daysOf(from, to) {
  const days = [];
  for (let t = Date.parse(from); t < Date.parse(to) && days.length < 400; t += DAY) days.push(isoDay(t));
  return days;
}

/** One line per key or endpoint (the five largest by the measure), a point per UTC day. */
function UsageChart({ rows, by, measure, from, to }) {
  const box = useRef(null);
  useEffect(() => {
    if (!box.current) return undefined;
    const days = daysOf(from, to);
    const totals = new Map();
    for (const r of rows) totals.set(nameOf(r, by), (totals.get(nameOf(r, by)) || 0) + (r[measure] || 0));
    const names = [...totals.entries()].sort((a, b) => b[1] - a[1]).slice(0, PALETTE.length).map(([n]) => n);
    const series = names.map((name) => days.map((d) => rows.filter((r) => r.day === d && nameOf(r, by) === name).reduce((s, r) => s + (r[measure] || 0), 0)));
    const fg = cssVar('--fg');
    const grid = cssVar('--line');
    const axis = { stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid } };
    const opts = {
      width: Math.max(280, box.current.clientWidth),
      height: 220,
      series: [{}, ...names.map((label, i) => ({ label, stroke: cssVar(PALETTE[i]), width: 2, points: { show: true, size: 5, fill: cssVar(PALETTE[i]) } }))],
      axes: [axis, { ...axis, size: 80 }],
      scales: { y: { range: (u, min, max) => [0, Math.max(measure === 'cost' ? 1e-6 : 1, max ?? 1)] } },
    };
    const plot = new uPlot(opts, [days.map((d) => Date.parse(d) / 1000), ...series], box.current);
    const resize = new ResizeObserver(() => plot.setSize({ width: Math.max(280, box.current ? box.current.clientWidth : 280), height: 220 }));
    resize.observe(box.current);
    return () => (resize.disconnect(), plot.destroy());
  }, [rows, by, measure, from, to]);
  const title = `${MEASURES.find(([m]) => m === measure)[1]} per day, by ${by}`;
  return html`<figure class="card chart" aria-label=${title}><figcaption><strong>${title}</strong></figcaption><div ref=${box}></div></figure>`;
}

/** Seconds in the unit a person reads them in (`4.22 s`, `1 min 30 s`, `2 h 5 min`). */
const secs = (s) => (s === null || s === undefined ? '—' : ms(Math.round(s * 1000)));

/** Usage: a chart over time by key or endpoint (names, not ids), and the period's table with seconds and cost. */
export function UsagePage() {
  const [from, setFrom] = useState(isoDay(Date.now() - 30 * DAY));
  const [to, setTo] = useState(isoDay(Date.now() + DAY));
  const [by, setBy] = useState('key');
  const [measure, setMeasure] = useState('cost');
  const [daily, setDaily] = useState(null);
  const [data, setData] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    setError(null);
    Promise.all([api(`admin/usage?${new URLSearchParams({ from, to, groupBy: `day,${by}` })}`), api(`admin/usage?${new URLSearchParams({ from, to, groupBy: by })}`)]).then(
      ([d, t]) => (setDaily(d), setData(t)),
      setError,
    );
  }, [from, to, by]);
  const csv = `/console/api/admin/usage?${new URLSearchParams({ from, to, groupBy: `day,${by}`, format: 'csv' })}`;
  return html`<section aria-labelledby="h-usage"><h1 id="h-usage">Usage</h1>
    <div class="row"><label>From <input type="date" value=${from} onChange=${(e) => setFrom(e.currentTarget.value)} /></label>
      <label>To <input type="date" value=${to} onChange=${(e) => setTo(e.currentTarget.value)} /></label>
      <label>By <select value=${by} onChange=${(e) => setBy(e.currentTarget.value)}><option value="key">key</option><option value="endpoint">endpoint</option></select></label>
      <label>Chart <select value=${measure} onChange=${(e) => setMeasure(e.currentTarget.value)}>${MEASURES.filter(([m]) => by === 'endpoint' || m !== 'workerSeconds').map(([m, l]) => html`<option value=${m}>${l}</option>`)}</select></label>
      <a href=${csv} download="gantry-usage.csv">Download CSV</a></div>
    <${ErrorBox} error=${error} />
    ${daily ? html`<${UsageChart} rows=${daily.usage} by=${by} measure=${measure === 'workerSeconds' && by === 'key' ? 'cost' : measure} from=${from} to=${to} />` : ''}
    ${data ? html`<div class="scroll"><table aria-label="Usage"><thead><tr><th scope="col">${by === 'key' ? 'Key' : 'Endpoint'}</th><th scope="col">Jobs</th><th scope="col">Execution</th><th scope="col">Worker time</th><th scope="col">GPU time</th><th scope="col">Megapixels</th><th scope="col">Cost (USD)</th></tr></thead>
      <tbody>${data.usage.map((u) => html`<tr><td>${nameOf(u, by)}</td><td>${u.jobs}</td><td>${secs(u.executionSeconds)}</td><td>${secs(u.workerSeconds)}</td><td>${secs(u.gpuSeconds)}</td><td>${u.megapixels}</td><td>${u.costUsd}</td></tr>`)}</tbody>
      <tfoot><tr><th scope="row">Total</th><td>${data.total.jobs}</td><td>${secs(data.total.executionSeconds)}</td><td>${secs(data.total.workerSeconds)}</td><td>${secs(data.total.gpuSeconds)}</td><td>${data.total.megapixels}</td><td>${data.total.costUsd}</td></tr></tfoot></table></div>
      <p class="muted">Worker and GPU seconds (cold start, idle and running) belong to the endpoint whose pool ran the worker; by key they are not shared out (—).</p>` : ''}
  </section>`;
}
