/* global location */
import { useEffect, useState } from 'preact/hooks';
import { api, seg } from './api.js';
import { EndpointPicker, ErrorBox, usePoll, useEndpoints, when } from './common.js';
import { html } from './html.js';
import { LogLines } from './log-view.js';

/**
 * A pool worker's log from the store, re-read every 2 s while "Follow" is on: time, level and
 * message, a JSON line's fields behind a toggle.
 */
function WorkerLog({ endpointId, workerId, stopped }) {
  const [lines, setLines] = useState(null);
  const [error, setError] = useState(null);
  // On for a stopped worker too: its last lines reach the store within a flush (docs/logs.md).
  const [followLog, setFollow] = useState(true);
  const load = () => api(`admin/endpoints/${seg(endpointId)}/workers/${seg(workerId)}/logs?lines=500`).then((r) => (setLines(r.lines), setError(null)), setError);
  usePoll(load, 2000, followLog, [endpointId, workerId]);
  useEffect(() => {
    if (!followLog) load();
  }, [endpointId, workerId]);
  return html`<div class="card" aria-label=${`Log of ${workerId}`}><div class="row"><h2>Log of ${workerId}${stopped ? ' (stopped)' : ''}</h2>
      <label class="inline"><input type="checkbox" checked=${followLog} onChange=${(e) => setFollow(e.currentTarget.checked)} /> Follow</label>
      <button class="secondary" onClick=${load}>Reload</button></div>
    <${ErrorBox} error=${error} />
    <${LogLines} lines=${lines} label=${`Log lines of ${workerId}`} /></div>`;
}

/** Jobs done: runs that ended on the worker (from the job meters), with how many did not complete. */
const done = (w) => {
  const failed = (w.jobsDone ?? 0) - (w.jobsCompleted ?? 0);
  return `${w.jobsDone ?? 0}${failed > 0 ? ` (${failed} not completed)` : ''}`;
};

/** A pool worker's start, or for a worker run by hand when the gateway first and last saw it poll. */
const seen = (w) => (w.managed ? when(w.startedAt) : html`first seen ${when(w.firstSeenAt)}<br /><span class="muted">last seen ${when(w.lastSeenAt)}</span>`);

const logButton = (w, select) => html`<button class="secondary" onClick=${() => select(w.id)} aria-label=${`Show the log of ${w.id}`}>Log</button>`;

/** The workers that stopped lately: when, why, how their last process ended; their logs stay in the store. */
function StoppedWorkers({ workers, select }) {
  if (workers.length === 0) return '';
  return html`<h2 id="h-stopped">Stopped lately</h2>
    <p class="muted">The last stopped workers of each endpoint are listed for a while (GANTRY_STOPPED_WORKERS_KEPT, GANTRY_STOPPED_WORKERS_KEPT_MS); their logs stay in the store GANTRY_LOG_KEEP_DAYS.</p>
    <div class="scroll"><table aria-labelledby="h-stopped"><thead><tr><th scope="col">Worker</th><th scope="col">State</th><th scope="col">Jobs done</th><th scope="col">Started</th><th scope="col">Stopped</th><th scope="col">Reason</th><th scope="col">Last exit</th><th scope="col"><span class="sr-only">Log</span></th></tr></thead>
    <tbody>${workers.map((w) => html`<tr key=${w.id}><td><code>${w.id}</code></td><td><span class="badge w-stopped">stopped</span></td><td>${done(w)}</td>
      <td>${when(w.startedAt)}</td><td>${when(w.stoppedAt)}</td><td>${w.reason || ''}</td><td>${w.lastExit || ''}</td><td>${logButton(w, select)}</td></tr>`)}</tbody></table></div>`;
}

const ms = (v) => (v === null || v === undefined ? '–' : v < 1000 ? `${v} ms` : `${(v / 1000).toFixed(1)} s`);

/** The endpoint's cold starts (workers started while a job waited, to their first job-take): count and p70/p90/p98, all and per kind. */
function ColdStarts({ stats }) {
  if (!stats) return '';
  const rows = [['All', stats], ['New worker', stats.start], ['Resumed (flashboot)', stats.resume]];
  return html`<h2>Cold starts</h2>
    <p class="muted">A worker started while a job waited, from the start (or resume) request to its first job-take; quantiles over the last ${stats.window} of them.</p>
    <table aria-label="Cold starts"><thead><tr><th scope="col">Kind</th><th scope="col">Count</th><th scope="col">p70</th><th scope="col">p90</th><th scope="col">p98</th><th scope="col">Last</th></tr></thead>
    <tbody>${rows.map(([name, s]) => html`<tr key=${name}><td>${name}</td><td>${s.count}</td><td>${ms(s.p70Ms)}</td><td>${ms(s.p90Ms)}</td><td>${ms(s.p98Ms)}</td><td>${ms(s.lastMs)}</td></tr>`)}</tbody></table>`;
}

/** Workers of an endpoint: state, jobs, reason; a pool worker's log, also of one that stopped lately. */
export function WorkersPage({ endpointId }) {
  const { endpoints, error: listError } = useEndpoints();
  const [data, setData] = useState(null);
  const [error, setError] = useState(null);
  const [selected, setSelected] = useState(null);
  const load = () => api(`admin/endpoints/${seg(endpointId)}/workers`).then(setData, setError);
  usePoll(load, 3000, Boolean(endpointId), [endpointId]);
  const live = data ? data.workers.filter((w) => w.state !== 'stopped') : [];
  const stopped = data ? data.workers.filter((w) => w.state === 'stopped') : [];
  const selectedStopped = stopped.some((w) => w.id === selected) && !live.some((w) => w.id === selected);
  return html`<section aria-labelledby="h-workers"><h1 id="h-workers">Workers</h1>
    <${EndpointPicker} endpoints=${endpoints} value=${endpointId || ''} onChange=${(id) => (setSelected(null), (location.hash = `#/workers/${seg(id)}`))} />
    <${ErrorBox} error=${listError || error} />
    ${endpointId && data ? html`<p class="muted">${data.pool ? 'This gateway runs the worker pool.' : 'Another gateway runs the worker pool.'}</p>
      <div class="scroll"><table aria-label="Workers"><thead><tr><th scope="col">Worker</th><th scope="col">State</th><th scope="col">Jobs now</th><th scope="col">Jobs done</th><th scope="col">Started</th><th scope="col">Reason</th><th scope="col"><span class="sr-only">Log</span></th></tr></thead>
      <tbody>${live.map((w) => html`<tr key=${w.id}><td><code>${w.id}</code>${w.managed ? '' : html` <span class="muted">(by hand)</span>`}</td>
        <td><span class=${`badge w-${w.state}`}>${w.state}</span></td><td>${w.jobs ?? 0}</td><td>${done(w)}</td><td>${seen(w)}</td><td>${[w.progress, w.reason].filter(Boolean).join('; ')}</td>
        <td>${w.managed ? logButton(w, setSelected) : ''}</td></tr>`)}</tbody></table></div>
      ${live.length === 0 ? html`<p>No workers right now.</p>` : ''}
      <${ColdStarts} stats=${data.coldStarts} />
      <${StoppedWorkers} workers=${stopped} select=${setSelected} />` : ''}
    ${selected ? html`<${WorkerLog} key=${selected} endpointId=${endpointId} workerId=${selected} stopped=${selectedStopped} />` : ''}
  </section>`;
}
