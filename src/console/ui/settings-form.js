import { useEffect, useState } from 'preact/hooks';
import { api, seg } from './api.js';
import { ErrorBox, ms } from './common.js';
import { html } from './html.js';

/** The integer settings as the form shows them: label, and how to say a value in human units. */
const INTEGER_FIELDS = [
  ['workersMin', 'Workers, minimum'],
  ['workersMax', 'Workers, maximum'],
  ['idleTimeout', 'Idle timeout (s)', (v) => ms(v * 1000)],
  ['executionTimeoutMs', 'Execution timeout (ms)', (v) => ms(v)],
  ['scalerValue', 'Scaler value'],
  ['maxAttempts', 'Attempts per job'],
  ['priority', 'Priority (allocator)'],
  ['shareWeight', 'Share weight (allocator)'],
];

/** Bounds of the container fields, as src/jobs/endpoint-settings.ts checks them (the API refuses anything else, naming the field). */
const GPUS_MAX = 64;
const MEMORY_MB = [6, 4_194_304];

let schemaPromise = null;
/** The endpoint settings' schema from /openapi.json (bounds and defaults as the API enforces them), read once. */
function useSettingsSchema() {
  const [schema, setSchema] = useState(null);
  useEffect(() => {
    schemaPromise ??= fetch('/openapi.json').then((r) => r.json()).then((doc) => doc.components.schemas.EndpointSettings.properties);
    schemaPromise.then(setSchema, () => setSchema({}));
  }, []);
  return schema;
}

/** The saved registry logins (id, name, username), for the image worker's credentials select. */
function useRegistryCredentials() {
  const [list, setList] = useState([]);
  useEffect(() => {
    api('admin/registry-credentials').then((r) => setList(r.registryCredentials), () => setList([]));
  }, []);
  return list;
}

/** A worker's settings as the form's fields (text as typed). */
function workerFields(w) {
  const image = Boolean(w && w.image);
  const command = w && w.command !== undefined ? (Array.isArray(w.command) ? JSON.stringify(w.command) : w.command) : '';
  return {
    kind: !w ? 'none' : image ? 'image' : 'command',
    command,
    cwd: (w && w.cwd) || '',
    image: (w && w.image) || '',
    env: w && w.env ? Object.entries(w.env).map(([k, v]) => `${k}=${v}`).join('\n') : '',
    gpus: w && w.gpus !== undefined ? (Array.isArray(w.gpus) ? w.gpus.join(', ') : String(w.gpus)) : '',
    gpuTypes: w && w.gpuTypes ? w.gpuTypes.join(', ') : '',
    memoryMb: w && w.memoryMb !== undefined ? String(w.memoryMb) : '',
    volumes: w && w.volumes ? w.volumes.join('\n') : '',
    registryCredentials: (w && w.registryCredentials) || '',
    prepull: Boolean(w && w.prepull),
  };
}

const list = (text, sep) => text.split(sep).map((s) => s.trim()).filter(Boolean);

/** `NAME=value` lines → an object; a line without `=` is refused here, naming the line. */
function envOf(text) {
  const env = {};
  list(text, '\n').forEach((line, i) => {
    const eq = line.indexOf('=');
    if (eq <= 0) throw new Error(`Environment, line ${i + 1}: write NAME=value`);
    env[line.slice(0, eq)] = line.slice(eq + 1);
  });
  return Object.keys(env).length > 0 ? env : undefined;
}

/** The form's worker fields → the `worker` setting (null: none); the API checks every field. */
export function workerSetting(f) {
  if (f.kind === 'none') return null;
  const env = envOf(f.env);
  if (f.kind === 'command') return { command: f.command, ...(env ? { env } : {}), ...(f.cwd.trim() ? { cwd: f.cwd.trim() } : {}) };
  const w = { image: f.image.trim() };
  const command = f.command.trim();
  if (command !== '') {
    try {
      w.command = command.startsWith('[') ? JSON.parse(command) : f.command;
    } catch {
      w.command = f.command;
    }
  }
  if (env) w.env = env;
  if (f.gpus.trim() !== '') w.gpus = /^\d+$/.test(f.gpus.trim()) ? Number(f.gpus.trim()) : list(f.gpus, ',');
  if (f.gpuTypes.trim() !== '') w.gpuTypes = list(f.gpuTypes, ',');
  if (f.memoryMb.trim() !== '') w.memoryMb = Number(f.memoryMb);
  if (f.volumes.trim() !== '') w.volumes = list(f.volumes, '\n');
  if (f.registryCredentials !== '') w.registryCredentials = f.registryCredentials;
  if (f.prepull) w.prepull = true;
  return w;
}

/** The form's starting values: the endpoint's settings, or blanks for a new one. */
function initialValues(e) {
  const values = { id: '', name: e.name || '', scalerType: e.scalerType || 'QUEUE_DELAY', webhookSecret: '', removeSecret: false, rateLimits: e.rateLimits ? JSON.stringify(e.rateLimits, null, 2) : '' };
  for (const [f] of INTEGER_FIELDS) values[f] = e[f] === undefined ? '' : String(e[f]);
  return { ...values, worker: workerFields(e.worker) };
}

/**
 * rateLimits as typed: JSON parsed, or the text as it is when not JSON (so `off` reads as "off",
 * anything else is refused by the API naming the field); blank is null on an update (the
 * defaults) and left out on a create.
 */
function rateLimitsField(body, text, creating) {
  const value = text.trim();
  if (value !== '') {
    try {
      body.rateLimits = JSON.parse(value);
    } catch {
      body.rateLimits = value;
    }
  } else if (!creating) body.rateLimits = null;
}

/** The body of a create or update: only the fields filled in; a secret removed as null. */
function settingsBody(v, creating) {
  const body = {};
  if (creating) body.id = v.id.trim();
  if (v.name.trim() !== '') body.name = v.name.trim();
  body.scalerType = v.scalerType;
  for (const [field] of INTEGER_FIELDS) if (v[field] !== '') body[field] = Number(v[field]);
  if (v.removeSecret) body.webhookSecret = null;
  else if (v.webhookSecret !== '') body.webhookSecret = v.webhookSecret;
  const worker = workerSetting(v.worker);
  if (worker !== null || !creating) body.worker = worker;
  rateLimitsField(body, v.rateLimits, creating);
  return body;
}

/** "default 5 · 1 to 86400 · now 5 s": what the field takes, from the API's own schema. */
function hintOf(schema, field, value, human) {
  const s = schema && schema[field];
  const parts = [];
  if (s && s.default !== undefined) parts.push(`default ${s.default}${human ? ` (${human(s.default)})` : ''}`);
  if (s && s.minimum !== undefined) parts.push(`${s.minimum} to ${s.maximum}`);
  if (human && value !== '' && Number.isFinite(Number(value))) parts.push(`= ${human(Number(value))}`);
  return parts.join(' · ');
}

/** The worker's fields: none, a command (local process), or an image (container on a Docker host). */
function WorkerFields({ f, set, credentials }) {
  const bind = (field) => ({ value: f[field], onInput: (ev) => set({ ...f, [field]: ev.currentTarget.value }) });
  const kinds = [['none', 'None (workers connect by hand)'], ['command', 'Command (a local process)'], ['image', 'Image (a container)']];
  return html`<fieldset class="worker"><legend>Worker</legend>
    <div class="row" role="radiogroup" aria-label="Worker kind">${kinds.map(([k, l]) => html`<label class="inline"><input type="radio" name="worker-kind" checked=${f.kind === k} onChange=${() => set({ ...f, kind: k })} /> ${l}</label>`)}</div>
    ${f.kind === 'none' ? '' : html`<div class="grid">
      ${f.kind === 'image' ? html`<label>Image <input ...${bind('image')} placeholder="repo/name:tag" autocomplete="off" required /></label>` : ''}
      <label>${f.kind === 'image' ? 'Command (optional: overrides the image\'s CMD; ["exec", "form"] as JSON)' : 'Command'} <input ...${bind('command')} autocomplete="off" required=${f.kind === 'command'} /></label>
      ${f.kind === 'command' ? html`<label>Working folder (optional) <input ...${bind('cwd')} autocomplete="off" /></label>` : html`
        <div><label>GPUs <input ...${bind('gpus')} inputmode="numeric" placeholder="none" aria-describedby="hint-gpus" /></label><span class="hint" id="hint-gpus">a count, 0 to ${GPUS_MAX}, or device ids: 0, 1</span></div>
        <div><label>GPU types <input ...${bind('gpuTypes')} placeholder="any" aria-describedby="hint-gputypes" /></label><span class="hint" id="hint-gputypes">up to 3 models, most preferred first: L4, A100-80GB</span></div>
        <div><label>Memory (MiB) <input ...${bind('memoryMb')} type="number" placeholder="no limit" aria-describedby="hint-memory" /></label><span class="hint" id="hint-memory">${MEMORY_MB[0]} to ${MEMORY_MB[1]}; blank: no limit</span></div>
        <label>Registry credentials <select value=${f.registryCredentials} onChange=${(ev) => set({ ...f, registryCredentials: ev.currentTarget.value })}>
          <option value="">none (a public image)</option>${credentials.map((c) => html`<option value=${c.id}>${c.name} (${c.username}, ${c.id})</option>`)}</select></label>`}
    </div>
    <label>Environment (one NAME=value a line) <textarea ...${bind('env')} rows="3" spellcheck="false"></textarea></label>
    ${f.kind === 'image' ? html`<label>Volumes (one source:target[:ro] a line) <textarea ...${bind('volumes')} rows="2" spellcheck="false"></textarea></label>
      <label class="inline"><input type="checkbox" checked=${f.prepull} onChange=${(ev) => set({ ...f, prepull: ev.currentTarget.checked })} /> Pull the image to every eligible host in advance</label>` : ''}`}
  </fieldset>`;
}

/** Create or edit an endpoint: every setting as a field, with its default and range; checked by the admin API's own validation. */
export function EndpointForm({ endpoint, onDone }) {
  const creating = !endpoint;
  const e = endpoint || {};
  const schema = useSettingsSchema();
  const credentials = useRegistryCredentials();
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
      ${INTEGER_FIELDS.map(([f, label, human]) => html`<div><label>${label} <input ...${bind(f)} type="number" step="1" placeholder=${schema && schema[f] ? String(schema[f].default) : ''} aria-describedby=${`hint-${f}`} /></label>
        <span class="hint" id=${`hint-${f}`}>${hintOf(schema, f, v[f], human)}</span></div>`)}
      <label>Webhook secret <input ...${bind('webhookSecret')} type="password" autocomplete="new-password" disabled=${v.removeSecret} placeholder=${e.webhookSigning ? '(set; blank keeps it)' : '(none)'} /></label>
    </div>
    ${e.webhookSigning ? html`<label class="inline"><input type="checkbox" checked=${v.removeSecret} onChange=${(ev) => setValues({ ...v, removeSecret: ev.currentTarget.checked })} /> Remove the webhook secret (webhook calls go unsigned)</label>` : ''}
    <${WorkerFields} f=${v.worker} set=${(worker) => setValues({ ...v, worker })} credentials=${credentials} />
    <label>Rate limits (JSON: "off", or operations such as {"run": {"per10s": 5000, "concurrent": 500}, "status": "off"}; blank for the defaults)
      <textarea ...${bind('rateLimits')} rows="3" spellcheck="false"></textarea></label>
    <${ErrorBox} error=${error} />
    <div class="row"><button type="submit">${creating ? 'Create endpoint' : 'Save'}</button>
      <button type="button" class="secondary" onClick=${() => onDone()}>Cancel</button></div>
  </form>`;
}

/** An endpoint's settings in words: times in human units, the worker as fields. */
export function SettingsFacts({ e }) {
  const w = e.worker;
  return html`<dl class="facts">
    <dt>Workers</dt><dd>${e.workersMin} to ${e.workersMax}</dd>
    <dt>Idle timeout</dt><dd>${ms(e.idleTimeout * 1000)}</dd>
    <dt>Execution timeout</dt><dd>${ms(e.executionTimeoutMs)}</dd>
    <dt>Scaler</dt><dd>${e.scalerType} ${e.scalerValue}</dd>
    <dt>Attempts per job</dt><dd>${e.maxAttempts}</dd>
    <dt>Priority, share weight</dt><dd>${e.priority ?? '—'}, ${e.shareWeight ?? '—'}</dd>
    <dt>Webhook signing</dt><dd>${e.webhookSigning ? 'on' : 'off'}</dd>
    <dt>Price per second</dt><dd>${e.pricePerSecond === null || e.pricePerSecond === undefined ? 'not priced' : `${e.pricePerSecond} USD`}</dd>
    <dt>Worker</dt><dd>${!w ? 'none: workers connect by hand' : w.image ? html`image <code>${w.image}</code>` : html`command <code>${w.command}</code>`}</dd>
    ${w && w.image && w.command ? html`<dt>Command</dt><dd><code>${Array.isArray(w.command) ? JSON.stringify(w.command) : w.command}</code></dd>` : ''}
    ${w && w.gpus !== undefined ? html`<dt>GPUs</dt><dd>${Array.isArray(w.gpus) ? w.gpus.join(', ') : w.gpus}${w.gpuTypes ? ` (${w.gpuTypes.join(' or ')})` : ''}</dd>` : ''}
    ${w && w.memoryMb ? html`<dt>Memory</dt><dd>${w.memoryMb} MiB</dd>` : ''}
    ${w && w.volumes ? html`<dt>Volumes</dt><dd>${w.volumes.join(', ')}</dd>` : ''}
    ${w && w.env ? html`<dt>Environment</dt><dd>${Object.keys(w.env).join(', ')}</dd>` : ''}
    ${w && w.registryCredentials ? html`<dt>Registry credentials</dt><dd><code>${w.registryCredentials}</code></dd>` : ''}
  </dl>`;
}
