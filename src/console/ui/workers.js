/* global location */
import { useState } from 'preact/hooks';
import { api, seg } from './api.js';
import { EndpointPicker, ErrorBox, usePoll, useEndpoints, when } from './common.js';
import { html } from './html.js';

/** A pool worker's log, re-read every 2 s while "Follow" is on. */
function WorkerLog({ endpointId, workerId }) {
  const [lines, setLines] = useState(null);
  const [error, setError] = useState(null);
  const [followLog, setFollow] = useState(true);
  const load = () => api(`admin/endpoints/${seg(endpointId)}/workers/${seg(workerId)}/logs?lines=500`).then((r) => (setLines(r.lines), setError(null)), setError);
  usePoll(load, 2000, followLog, [endpointId, workerId]);
  return html`<div class="card" aria-label=${`Log of ${workerId}`}><div class="row"><h2>Log of ${workerId}</h2>
      <label class="inline"><input type="checkbox" checked=${followLog} onChange=${(e) => setFollow(e.currentTarget.checked)} /> Follow</label>
      <button class="secondary" onClick=${load}>Reload</button></div>
    <${ErrorBox} error=${error} />
    <pre class="log" tabindex="0" aria-live="polite">${(lines || []).map((l) => html`<span class=${l.stream === 'stderr' ? 'stderr' : ''}>${l.at.slice(11, 19)} ${l.line}\n</span>`)}</pre></div>`;
}

/** Workers of an endpoint: state, jobs, reason; a pool worker's log. */
export function WorkersPage({ endpointId }) {
  const { endpoints, error: listError } = useEndpoints();
  const [data, setData] = useState(null);
  const [error, setError] = useState(null);
  const [selected, setSelected] = useState(null);
  const load = () => api(`admin/endpoints/${seg(endpointId)}/workers`).then(setData, setError);
  usePoll(load, 3000, Boolean(endpointId), [endpointId]);
  return html`<section aria-labelledby="h-workers"><h1 id="h-workers">Workers</h1>
    <${EndpointPicker} endpoints=${endpoints} value=${endpointId || ''} onChange=${(id) => (setSelected(null), (location.hash = `#/workers/${seg(id)}`))} />
    <${ErrorBox} error=${listError || error} />
    ${endpointId && data ? html`<p class="muted">${data.pool ? 'This gateway runs the worker pool.' : 'Another gateway runs the worker pool.'}</p>
      <table><thead><tr><th scope="col">Worker</th><th scope="col">State</th><th scope="col">Jobs</th><th scope="col">Started</th><th scope="col">Reason</th><th scope="col"><span class="sr-only">Log</span></th></tr></thead>
      <tbody>${data.workers.map((w) => html`<tr key=${w.id}><td><code>${w.id}</code>${w.managed ? '' : html` <span class="muted">(by hand)</span>`}</td>
        <td><span class=${`badge w-${w.state}`}>${w.state}</span></td><td>${w.jobs ?? 0}</td><td>${when(w.startedAt || w.firstSeenAt)}</td><td>${w.reason || ''}</td>
        <td>${w.managed ? html`<button class="secondary" onClick=${() => setSelected(w.id)} aria-label=${`Show the log of ${w.id}`}>Log</button>` : ''}</td></tr>`)}</tbody></table>
      ${data.workers.length === 0 ? html`<p>No workers right now.</p>` : ''}` : ''}
    ${selected ? html`<${WorkerLog} key=${selected} endpointId=${endpointId} workerId=${selected} />` : ''}
  </section>`;
}
