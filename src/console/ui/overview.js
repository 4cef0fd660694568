import { useState } from 'preact/hooks';
import { api, seg } from './api.js';
import { ErrorBox, ms, usePoll } from './common.js';
import { html } from './html.js';

/** The most endpoints the overview reads (three calls each, every 10 s). */
const MAX_ENDPOINTS = 50;
const STATES = ['running', 'idle', 'initializing', 'draining', 'throttled', 'unhealthy'];

/** Start to first poll of the pool workers listed (live and stopped lately): the cold starts this gateway saw. */
function coldStarts(workers) {
  const times = workers.filter((w) => w.managed && w.startedAt && w.readyAt).map((w) => Date.parse(w.readyAt) - Date.parse(w.startedAt)).sort((a, b) => a - b);
  return { count: times.length, median: times.length ? times[Math.floor((times.length - 1) / 2)] : null, max: times.length ? times[times.length - 1] : null };
}

/** One endpoint's row: the last hour's requests and failures (per-minute aggregates), health now, workers by state, cold starts. */
async function rowOf(e) {
  const id = seg(e.id);
  const [charts, health, workers] = await Promise.all([api(`charts/${id}?minutes=60`), api(`v2/${id}/health`), api(`admin/endpoints/${id}/workers`).catch(() => ({ workers: [] }))]);
  const sum = (f) => charts.points.reduce((a, p) => a + p[f], 0);
  const byState = {};
  for (const w of workers.workers) if (w.state !== 'stopped') byState[w.state] = (byState[w.state] || 0) + 1;
  return { id: e.id, name: e.name, requests: sum('submitted'), completed: sum('completed'), failed: sum('failed'), inQueue: health.jobs.inQueue, inProgress: health.jobs.inProgress, byState, cold: coldStarts(workers.workers) };
}

/** The overview across endpoints: requests and failures in the last hour, the queue now, workers by state, cold starts. */
export function OverviewPage() {
  const [rows, setRows] = useState(null);
  const [error, setError] = useState(null);
  const [more, setMore] = useState(0);
  const load = async () => {
    try {
      const { endpoints } = await api('admin/endpoints');
      setMore(Math.max(0, endpoints.length - MAX_ENDPOINTS));
      setRows(await Promise.all(endpoints.slice(0, MAX_ENDPOINTS).map(rowOf)));
      setError(null);
    } catch (err) {
      setError(err);
    }
  };
  usePoll(load, 10_000, true, []);
  const total = (f) => (rows || []).reduce((a, r) => a + r[f], 0);
  const workersTotal = (rows || []).reduce((a, r) => a + Object.values(r.byState).reduce((x, y) => x + y, 0), 0);
  return html`<section aria-labelledby="h-overview"><h1 id="h-overview">Overview</h1>
    <${ErrorBox} error=${error} />
    ${rows ? html`<div class="tiles" aria-label="Totals">
        <div class="card tile"><span class="big">${total('requests')}</span> requests in the last hour</div>
        <div class="card tile"><span class="big">${total('failed')}</span> failed, timed out or cancelled in the last hour</div>
        <div class="card tile"><span class="big">${total('inQueue')}</span> queued now</div>
        <div class="card tile"><span class="big">${workersTotal}</span> workers now</div></div>
      <div class="scroll"><table aria-label="Endpoints overview"><thead><tr><th scope="col">Endpoint</th><th scope="col">Requests (1 h)</th><th scope="col">Completed (1 h)</th><th scope="col">Failed (1 h)</th><th scope="col">Queue now</th><th scope="col">Workers by state</th><th scope="col">Cold starts</th></tr></thead>
        <tbody>${rows.map((r) => html`<tr key=${r.id}><td><a href=${`#/endpoint/${seg(r.id)}`}>${r.id}</a></td><td>${r.requests}</td><td>${r.completed}</td>
          <td>${r.failed > 0 ? html`<span class="error-text">${r.failed}</span>` : 0}</td><td>${r.inQueue} queued, ${r.inProgress} running</td>
          <td>${STATES.filter((s) => r.byState[s]).map((s) => html`<span class=${`badge w-${s}`}>${r.byState[s]} ${s}</span> `)}${Object.keys(r.byState).length === 0 ? html`<span class="muted">none</span>` : ''}</td>
          <td>${r.cold.count === 0 ? html`<span class="muted">none seen</span>` : `${r.cold.count}: median ${ms(r.cold.median)}, longest ${ms(r.cold.max)}`}</td></tr>`)}</tbody></table></div>
      ${more > 0 ? html`<p class="muted">${more} more endpoints not shown (the overview reads the first ${MAX_ENDPOINTS}).</p>` : ''}
      <p class="muted">Requests, completed and failed: the per-minute aggregates of the last hour (failed counts failed, timed-out and cancelled runs). Cold starts: start to first poll of the pool workers this gateway lists now (running and stopped lately).</p>` : html`<p class="muted">Loading…</p>`}
  </section>`;
}
