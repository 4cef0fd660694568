import { useEffect, useState } from 'preact/hooks';
import { api, seg } from './api.js';
import { ErrorBox, ms } from './common.js';
import { html } from './html.js';

const INTEGER_FIELDS = [
  ['workersMin', 'Workers, minimum'],
  ['workersMax', 'Workers, maximum'],
  ['idleTimeout', 'Idle timeout (s)'],
  ['executionTimeoutMs', 'Execution timeout (ms)'],
  ['scalerValue', 'Scaler value'],
  ['maxAttempts', 'Attempts per job'],
];

/** The health of one endpoint, as /health answers it. */
function Health({ id }) {
  const [health, setHealth] = useState(null);
  useEffect(() => {
    api(`v2/${seg(id)}/health`).then(setHealth, () => setHealth(undefined));
  }, [id]);
  if (health === null) return html`<span class="muted">…</span>`;
  if (health === undefined) return html`<span class="muted">unavailable</span>`;
  const { jobs, workers } = health;
  const unhealthy = workers.unhealthy > 0 ? html` <span class="badge s-failed">${workers.unhealthy} unhealthy</span>` : '';
  return html`<span>${jobs.inQueue} queued · ${jobs.inProgress} running · ${jobs.completed} done · ${jobs.failed} failed</span><br />
    <span class="muted">workers: ${workers.ready} ready, ${workers.running} running, ${workers.initializing} starting</span>${unhealthy}`;
}

/** The form's starting values: the endpoint's settings, or blanks for a new one. */
function initialValues(e) {
  const values = {
    id: '',
    name: e.name || '',
    scalerType: e.scalerType || 'QUEUE_DELAY',
    webhookSecret: '',
    removeSecret: false,
    worker: e.worker ? JSON.stringify(e.worker, null, 2) : '',
    rateLimits: e.rateLimits ? JSON.stringify(e.rateLimits, null, 2) : '',
  };
  for (const [f] of INTEGER_FIELDS) values[f] = e[f] === undefined ? '' : String(e[f]);
  return values;
}

/**
 * A JSON field of the form: its value parsed, or the text as typed when it is not JSON (so `off`
 * reads as "off", and anything else is refused by the API naming the field); blank is null on
 * an update (none, or the defaults) and left out on a create.
 */
function jsonField(body, field, text, creating) {
  const value = text.trim();
  if (value !== '') {
    try {
      body[field] = JSON.parse(value);
    } catch {
      body[field] = value;
    }
  } else if (!creating) body[field] = null;
}

/** The body of a create or update: only the fields filled in; worker and rateLimits as JSON; a secret removed as null. */
function settingsBody(v, creating) {
  const body = {};
  if (creating) body.id = v.id.trim();
  if (v.name.trim() !== '') body.name = v.name.trim();
  body.scalerType = v.scalerType;
  for (const [field] of INTEGER_FIELDS) if (v[field] !== '') body[field] = Number(v[field]);
  if (v.removeSecret) body.webhookSecret = null;
  else if (v.webhookSecret !== '') body.webhookSecret = v.webhookSecret;
  jsonField(body, 'worker', v.worker, creating);
  jsonField(body, 'rateLimits', v.rateLimits, creating);
  return body;
}

/** Create or edit an endpoint: every setting, checked by the admin API's own validation. */
function EndpointForm({ endpoint, onDone }) {
  const creating = !endpoint;
  const e = endpoint || {};
  const [error, setError] = useState(null);
  const [v, setValues] = useState(() => initialValues(e));
  const bind = (field) => ({ name: field, value: v[field], onInput: (ev) => setValues({ ...v, [field]: ev.currentTarget.value }) });
  const submit = async (event) => {
    event.preventDefault();
    setError(null);
    try {
      const body = settingsBody(v, creating);
      if (creating) await api('admin/endpoints', { method: 'POST', body });
      else await api(`admin/endpoints/${seg(e.id)}`, { method: 'PATCH', body });
      onDone();
    } catch (err) {
      setError(err);
    }
  };
  return html`<form class="card" onSubmit=${submit} aria-label=${creating ? 'New endpoint' : `Edit ${e.id}`}>
    <h2>${creating ? 'New endpoint' : `Edit ${e.id}`}</h2>
    <div class="grid">
      ${creating ? html`<label>Id <input ...${bind('id')} required autocomplete="off" /></label>` : ''}
      <label>Name <input ...${bind('name')} /></label>
      <label>Scaler type <select ...${bind('scalerType')} onChange=${(ev) => setValues({ ...v, scalerType: ev.currentTarget.value })}>
        <option value="QUEUE_DELAY">QUEUE_DELAY</option><option value="REQUEST_COUNT">REQUEST_COUNT</option></select></label>
      ${INTEGER_FIELDS.map(([f, label]) => html`<label>${label} <input ...${bind(f)} type="number" step="1" /></label>`)}
      <label>Webhook secret <input ...${bind('webhookSecret')} type="password" autocomplete="new-password" disabled=${v.removeSecret} placeholder=${e.webhookSigning ? '(set; blank keeps it)' : '(none)'} /></label>
    </div>
    ${e.webhookSigning ? html`<label class="inline"><input type="checkbox" checked=${v.removeSecret} onChange=${(ev) => setValues({ ...v, removeSecret: ev.currentTarget.checked })} /> Remove the webhook secret (webhook calls go unsigned)</label>` : ''}
    <label>Worker (JSON: {"command": "..."} or {"image": "..."}; blank for none)
      <textarea ...${bind('worker')} rows="4" spellcheck="false"></textarea></label>
    <label>Rate limits (JSON: "off", or operations such as {"run": {"per10s": 5000, "concurrent": 500}, "status": "off"}; blank for the defaults)
      <textarea ...${bind('rateLimits')} rows="3" spellcheck="false"></textarea></label>
    <${ErrorBox} error=${error} />
    <div class="row"><button type="submit">${creating ? 'Create endpoint' : 'Save'}</button>
      <button type="button" class="secondary" onClick=${() => onDone()}>Cancel</button></div>
  </form>`;
}

/** Endpoints: list with health, create, edit. */
export function EndpointsPage() {
  const [list, setList] = useState(null);
  const [error, setError] = useState(null);
  const [editing, setEditing] = useState(null);
  const load = () => api('admin/endpoints').then((r) => setList(r.endpoints), setError);
  useEffect(() => {
    load();
  }, []);
  const done = () => {
    setEditing(null);
    load();
  };
  return html`<section aria-labelledby="h-endpoints">
    <div class="row"><h1 id="h-endpoints">Endpoints</h1><button onClick=${() => setEditing('new')}>New endpoint</button></div>
    ${editing ? html`<${EndpointForm} key=${editing === 'new' ? 'new' : editing.id} endpoint=${editing === 'new' ? null : editing} onDone=${done} />` : ''}
    <${ErrorBox} error=${error} />
    <table><thead><tr><th scope="col">Endpoint</th><th scope="col">Workers</th><th scope="col">Timeout</th><th scope="col">Health</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
      <tbody>${(list || []).map((e) => html`<tr key=${e.id}>
        <td><strong>${e.id}</strong><br /><span class="muted">${e.name}</span></td>
        <td>${e.workersMin}–${e.workersMax}</td><td>${ms(e.executionTimeoutMs)}</td>
        <td><${Health} id=${e.id} /></td>
        <td class="actions"><button class="secondary" onClick=${() => setEditing(e)} aria-label=${`Edit ${e.id}`}>Edit</button>
          <a href=${`#/charts/${seg(e.id)}`}>Charts</a> <a href=${`#/jobs/${seg(e.id)}`}>Jobs</a> <a href=${`#/workers/${seg(e.id)}`}>Workers</a></td></tr>`)}</tbody></table>
  </section>`;
}
