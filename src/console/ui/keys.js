/* global navigator */
import { useEffect, useState } from 'preact/hooks';
import { api, seg } from './api.js';
import { ConfirmButton } from './confirm.js';
import { ErrorBox, when } from './common.js';
import { html } from './html.js';

const SCOPES = ['admin', 'run', 'read', 'worker'];

/** A key just made: shown once, with a copy button. */
function NewKey({ created, onClose }) {
  const [copied, setCopied] = useState(false);
  const copy = () => navigator.clipboard.writeText(created.key).then(() => setCopied(true), () => setCopied(false));
  return html`<div class="card notice" role="status" aria-label="New API key">
    <p><strong>Key ${created.name} created.</strong> Copy it now: it is not shown again.</p>
    <div class="row"><code class="secret" id="new-key">${created.key}</code>
      <button onClick=${copy}>${copied ? 'Copied' : 'Copy'}</button>
      <button class="secondary" onClick=${onClose}>Done</button></div></div>`;
}

/** The create form: name, scopes, optional endpoint list. */
function KeyForm({ onCreated }) {
  const [error, setError] = useState(null);
  const submit = async (event) => {
    event.preventDefault();
    setError(null);
    const form = event.currentTarget;
    const scopes = SCOPES.filter((s) => form[`scope-${s}`].checked);
    const endpoints = form.endpoints.value.split(',').map((s) => s.trim()).filter(Boolean);
    try {
      const created = await api('admin/keys', { method: 'POST', body: { name: form.keyname.value, scopes, ...(endpoints.length ? { endpoints } : {}) } });
      form.reset();
      onCreated(created);
    } catch (err) {
      setError(err);
    }
  };
  return html`<form class="card" onSubmit=${submit} aria-label="Create an API key"><h2>Create an API key</h2>
    <div class="grid"><label>Name <input name="keyname" required maxlength="128" /></label>
      <fieldset><legend>Scopes</legend>${SCOPES.map((s) => html`<label class="inline"><input type="checkbox" name=${`scope-${s}`} checked=${s === 'run'} /> ${s}</label>`)}</fieldset>
      <label>Endpoints (comma-separated; blank for all) <input name="endpoints" /></label></div>
    <${ErrorBox} error=${error} /><button type="submit">Create key</button></form>`;
}

/** A key's budget and job cap: shown, and changed in place (PATCH /admin/v1/keys/{id}). */
function KeyLimits({ k, onSaved }) {
  const [editing, setEditing] = useState(false);
  const [error, setError] = useState(null);
  const save = async (event) => {
    event.preventDefault();
    const form = event.currentTarget;
    const budget = form.budget.value.trim();
    const cap = form.cap.value.trim();
    try {
      await api(`admin/keys/${seg(k.id)}`, {
        method: 'PATCH',
        body: { budgetUsd: budget === '' ? null : budget, budgetPeriod: budget === '' ? null : form.period.value, maxConcurrentJobs: cap === '' ? null : Number(cap) },
      });
      setEditing(false);
      onSaved();
    } catch (err) {
      setError(err);
    }
  };
  if (!editing) {
    return html`<span>${k.budget ? `${k.budget.spentUsd} of ${k.budget.budgetUsd} USD this ${k.budget.budgetPeriod}` : 'no budget'}; ${k.maxConcurrentJobs ? `at most ${k.maxConcurrentJobs} jobs` : 'no job cap'}</span>
      <button class="secondary" aria-label=${`Limits of ${k.name}`} onClick=${() => setEditing(true)}>Edit</button>`;
  }
  return html`<form class="row" onSubmit=${save} aria-label=${`Limits of ${k.name}`}>
    <label>Budget (USD) <input name="budget" inputmode="decimal" value=${k.budgetUsd ?? ''} size="8" /></label>
    <label>per <select name="period" value=${k.budgetPeriod || 'month'}><option value="day">day</option><option value="month">month</option></select></label>
    <label>Max jobs <input name="cap" inputmode="numeric" value=${k.maxConcurrentJobs ?? ''} size="6" /></label>
    <button type="submit">Save</button><button type="button" class="secondary" onClick=${() => setEditing(false)}>Cancel</button>
    <${ErrorBox} error=${error} /></form>`;
}

/**
 * Revoke, asked for first. A key the gateway manages (a pool worker's own: it goes with its
 * worker) says what revoking it does and is revoked with force; the server refuses it otherwise.
 */
function Revoke({ k, revoke }) {
  if (k.managed) {
    return html`<${ConfirmButton} label="Revoke" ariaLabel=${`Revoke ${k.name}`} secondary=${true} confirmLabel="Revoke anyway"
      question="A pool worker's own key: the gateway revokes it when the worker stops. Revoked now, the worker is cut off and its jobs go back to the queue." onConfirm=${() => revoke(k.id, true)} />`;
  }
  return html`<${ConfirmButton} label="Revoke" ariaLabel=${`Revoke ${k.name}`} secondary=${true} confirmLabel="Confirm revoke" question="Requests with this key stop working at once." onConfirm=${() => revoke(k.id, false)} />`;
}

/** API keys: create (shown once), list (prefix, last use, managed ones marked), limit, revoke. */
export function KeysPage() {
  const [keys, setKeys] = useState(null);
  const [created, setCreated] = useState(null);
  const [error, setError] = useState(null);
  const load = () => api('admin/keys').then((r) => setKeys(r.keys), setError);
  useEffect(() => {
    load();
  }, []);
  const revoke = async (id, force) => {
    try {
      await api(`admin/keys/${seg(id)}${force ? '?force=true' : ''}`, { method: 'DELETE' });
      await load();
    } catch (err) {
      setError(err);
    }
  };
  return html`<section aria-labelledby="h-keys"><h1 id="h-keys">API keys</h1>
    ${created ? html`<${NewKey} created=${created} onClose=${() => setCreated(null)} />` : ''}
    <${KeyForm} onCreated=${(c) => (setCreated(c), load())} />
    <${ErrorBox} error=${error} />
    <div class="scroll"><table aria-label="API keys"><thead><tr><th scope="col">Name</th><th scope="col">Key</th><th scope="col">Scopes</th><th scope="col">Endpoints</th><th scope="col">Budget and job cap</th><th scope="col">Created</th><th scope="col">Last used</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
      <tbody>${(keys || []).map((k) => html`<tr key=${k.id}><td>${k.name}${k.managed ? html` <span class="badge managed" title="Made and revoked by the gateway with its worker">managed</span>` : ''}</td>
        <td>${k.prefix ? html`<code>${k.prefix}…</code><br />` : ''}<span class="muted">id ${k.id.slice(0, 8)}</span></td><td>${(k.scopes || []).join(', ')}</td>
        <td>${k.endpoints ? k.endpoints.join(', ') : 'all'}</td><td><${KeyLimits} k=${k} onSaved=${load} /></td><td>${when(k.createdAt)}</td><td>${k.lastUsedAt ? when(k.lastUsedAt) : 'never'}</td>
        <td><${Revoke} k=${k} revoke=${revoke} /></td></tr>`)}</tbody></table></div>
    <p class="muted">The key column shows each key's first characters (the rest is never stored). Last used is written at most once a minute. Managed keys belong to pool workers and go with them.</p>
  </section>`;
}
