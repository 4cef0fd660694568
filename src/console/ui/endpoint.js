/* global location, navigator */
import { useEffect, useState } from 'preact/hooks';
import { api, seg } from './api.js';
import { ConfirmButton } from './confirm.js';
import { ErrorBox, usePoll } from './common.js';
import { HEALTH_NOTE, HealthLine } from './endpoints.js';
import { html } from './html.js';
import { EndpointForm, SettingsFacts } from './settings-form.js';
import { endpointUrls, snippets } from './snippets.js';

/** A snippet with a copy button; the text is the one a test runs. */
function Snippets({ endpointId }) {
  const all = snippets(location.origin, endpointId);
  const [shown, setShown] = useState(all[0].id);
  const [copied, setCopied] = useState(null);
  const current = all.find((s) => s.id === shown) || all[0];
  const copy = () => navigator.clipboard.writeText(current.text).then(() => setCopied(current.id), () => setCopied(null));
  return html`<div class="card snippets">
    <div class="row" role="tablist" aria-label="Snippets">${all.map((s) => html`<button type="button" role="tab" id=${`tab-${s.id}`} aria-selected=${s.id === shown ? 'true' : 'false'} aria-controls="snippet" class=${s.id === shown ? '' : 'secondary'} onClick=${() => (setShown(s.id), setCopied(null))}>${s.label}</button>`)}</div>
    <div role="tabpanel" id="snippet" aria-labelledby=${`tab-${current.id}`}>
      <p class="muted">${current.note} The key is read from <code>GANTRY_API_KEY</code> (a key with the run scope, from API keys).</p>
      <pre class="json snippet" tabindex="0" aria-label=${`${current.label} snippet`} data-snippet=${current.id}>${current.text}</pre>
      <button type="button" class="secondary" onClick=${copy}>${copied === current.id ? 'Copied' : 'Copy'}</button></div></div>`;
}

/**
 * One endpoint (`#/endpoint/{id}`): health (each count named), its URLs and copy-paste snippets,
 * its settings in words and the form to change them, purge the queue and delete the endpoint,
 * each asked for first.
 */
export function EndpointPage({ endpointId }) {
  const [endpoint, setEndpoint] = useState(null);
  const [health, setHealth] = useState(null);
  const [editing, setEditing] = useState(false);
  const [error, setError] = useState(null);
  const [notice, setNotice] = useState('');
  const id = seg(endpointId);
  const load = () => api(`admin/endpoints/${id}`).then(setEndpoint, setError);
  useEffect(() => {
    load();
  }, [endpointId]);
  usePoll(() => api(`v2/${id}/health`).then(setHealth, () => setHealth(null)), 3000, true, [endpointId]);
  const purge = async () => {
    setError(null);
    try {
      const r = await api(`v2/${id}/purge-queue`, { method: 'POST', body: {} });
      setNotice(`Purged: ${r.removed} queued job${r.removed === 1 ? '' : 's'} cancelled.`);
      setHealth(await api(`v2/${id}/health`));
    } catch (err) {
      setError(err);
    }
  };
  const remove = async () => {
    setError(null);
    try {
      await api(`admin/endpoints/${id}`, { method: 'DELETE' });
      location.hash = '#/endpoints';
    } catch (err) {
      setError(err);
    }
  };
  const queued = health ? health.jobs.inQueue : 0;
  return html`<section aria-labelledby="h-endpoint">
    <p><a href="#/endpoints">← Endpoints</a></p>
    <h1 id="h-endpoint">Endpoint ${endpointId}</h1>
    ${endpoint && endpoint.name && endpoint.name !== endpoint.id ? html`<p class="muted">${endpoint.name}</p>` : ''}
    <nav class="row" aria-label="This endpoint"><a href=${`#/jobs/${id}`}>Jobs</a> <a href=${`#/workers/${id}`}>Workers</a> <a href=${`#/charts/${id}`}>Charts</a> <a href=${`#/editor/${id}`}>Test editor</a></nav>
    <${ErrorBox} error=${error} />
    ${notice ? html`<p role="status">${notice}</p>` : ''}
    <h2>Health</h2>
    ${health ? html`<p aria-label="Health"><${HealthLine} health=${health} /></p><p class="muted">${HEALTH_NOTE}</p>` : html`<p class="muted">…</p>`}
    <h2 id="h-urls">URLs</h2>
    <div class="scroll"><table class="wrap" aria-labelledby="h-urls"><thead><tr><th scope="col">What</th><th scope="col">Method</th><th scope="col">URL</th></tr></thead>
      <tbody>${endpointUrls(location.origin, endpointId).map(([what, method, url]) => html`<tr key=${what}><td>${what}</td><td>${method}</td><td><code>${url}</code></td></tr>`)}</tbody></table></div>
    <h2>Snippets</h2>
    <${Snippets} endpointId=${endpointId} />
    <div class="row"><h2>Settings</h2>${endpoint && !editing ? html`<button class="secondary" onClick=${() => setEditing(true)} aria-label=${`Edit ${endpointId}`}>Edit</button>` : ''}</div>
    ${endpoint && editing ? html`<${EndpointForm} endpoint=${endpoint} onDone=${() => (setEditing(false), load())} />` : ''}
    ${endpoint && !editing ? html`<${SettingsFacts} e=${endpoint} />` : ''}
    <h2>Danger zone</h2>
    <div class="card danger-zone">
      <div class="row"><${ConfirmButton} label="Purge queue" confirmLabel=${`Cancel ${queued} queued job${queued === 1 ? '' : 's'}`} question="Every queued job is cancelled (running jobs go on)." onConfirm=${purge} /></div>
      <div class="row"><${ConfirmButton} label="Delete endpoint" confirmLabel="Delete for good" typed=${endpointId} question="The endpoint, its jobs and their results are deleted; its workers are stopped." onConfirm=${remove} /></div>
    </div>
  </section>`;
}
