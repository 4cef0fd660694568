/* global location */
import { useEffect, useState } from 'preact/hooks';
import { api, seg } from './api.js';
import { EndpointPicker, ErrorBox, usePoll, useEndpoints, when } from './common.js';
import { html } from './html.js';

/**
 * A pool worker's log, re-read every 2 s while "Follow" is on (off for a stopped worker: its log
 * no longer grows). One span a line, each a block of its own (app.css `pre.log span`): htm drops
 * a trailing "\n" in a template, so a newline there would never reach the page.
 */
function WorkerLog({ endpointId, workerId, stopped }) {
  const [lines, setLines] = useState(null);
  const [error, setError] = useState(null);
  const [followLog, setFollow] = useState(!stopped);
  const load = () => api(`admin/endpoints/${seg(endpointId)}/workers/${seg(workerId)}/logs?lines=500`).then((r) => (setLines(r.lines), setError(null)), setError);
  usePoll(load, 2000, followLog, [endpointId, workerId]);
  useEffect(() => {
    if (!followLog) load();
  }, [endpointId, workerId]);
  return html`<div class="card" aria-label=${`Log of ${workerId}`}><div class="row"><h2>Log of ${workerId}${stopped ? ' (stopped)' : ''}</h2>
      <label class="inline"><input type="checkbox" checked=${followLog} onChange=${(e) => setFollow(e.currentTarget.checked)} /> Follow</label>
      <button class="secondary" onClick=${load}>Reload</button></div>
    <${ErrorBox} error=${error} />
    <pre class="log" tabindex="0" aria-live="polite">${(lines || []).map((l) => html`<span class=${l.stream === 'stderr' ? 'stderr' : ''}>${l.at.slice(11, 19)} ${l.line}</span>`)}</pre></div>`;
}

/** Jobs done: runs that ended on the worker (from the job meters), with how many did not complete. */
const done = (w) => {
  const failed = (w.jobsDone ?? 0) - (w.jobsCompleted ?? 0);
  return `${w.jobsDone ?? 0}${failed > 0 ? ` (${failed} not completed)` : ''}`;
};

/** A pool worker's start, or for a worker run by hand when the gateway first and last saw it poll. */
const seen = (w) => (w.managed ? when(w.startedAt) : html`first seen ${when(w.firstSeenAt)}<br /><span class="muted">last seen ${when(w.lastSeenAt)}</span>`);

const logButton = (w, select) => html`<button class="secondary" onClick=${() => select(w.id)} aria-label=${`Show the log of ${w.id}`}>Log</button>`;

/** The workers that stopped lately: when, why, how their last process ended; their logs stay readable for a while. */
function StoppedWorkers({ workers, select }) {
  if (workers.length === 0) return '';
  return html`<h2 id="h-stopped">Stopped lately</h2>
    <p class="muted">The gateway keeps the logs of the last stopped workers of each endpoint for a while (GANTRY_STOPPED_WORKERS_KEPT, GANTRY_STOPPED_WORKERS_KEPT_MS).</p>
    <div class="scroll"><table aria-labelledby="h-stopped"><thead><tr><th scope="col">Worker</th><th scope="col">State</th><th scope="col">Jobs done</th><th scope="col">Started</th><th scope="col">Stopped</th><th scope="col">Reason</th><th scope="col">Last exit</th><th scope="col"><span class="sr-only">Log</span></th></tr></thead>
    <tbody>${workers.map((w) => html`<tr key=${w.id}><td><code>${w.id}</code></td><td><span class="badge w-stopped">stopped</span></td><td>${done(w)}</td>
      <td>${when(w.startedAt)}</td><td>${when(w.stoppedAt)}</td><td>${w.reason || ''}</td><td>${w.lastExit || ''}</td><td>${logButton(w, select)}</td></tr>`)}</tbody></table></div>`;
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
      <${StoppedWorkers} workers=${stopped} select=${setSelected} />` : ''}
    ${selected ? html`<${WorkerLog} key=${selected} endpointId=${endpointId} workerId=${selected} stopped=${selectedStopped} />` : ''}
  </section>`;
}
