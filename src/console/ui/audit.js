/* global URLSearchParams */
import { useEffect, useState } from 'preact/hooks';
import { api } from './api.js';
import { ErrorBox, when } from './common.js';
import { html } from './html.js';

/** The actions the gateway records (docs/api.md, "Audit log"), for the filter; a prefix with a dot picks a group. */
const ACTIONS = [
  ['', 'All actions'],
  ['key.', 'API keys'],
  ['endpoint.', 'Endpoints'],
  ['registry-credential.', 'Registry credentials'],
  ['queue.purge', 'Purge queue'],
  ['job.', 'Job cancels and retries'],
  ['console.', 'Console sign-ins'],
];
const OUTCOME_CLASS = { ok: 's-completed', failed: 's-failed', limited: 's-failed' };

/** Who, as a person reads it: the key's name, and the console session it acted through. */
function Who({ actor }) {
  if (actor.kind === 'anonymous') return html`<span class="muted">nobody known</span>`;
  const key = actor.keyName || (actor.keyId ? `(deleted) ${actor.keyId.slice(0, 8)}` : '(unknown key)');
  return html`${key}${actor.kind === 'console' ? html` <span class="muted">console ${actor.session}</span>` : ''}`;
}

/** What changed, in words: fields, env variable names (never values), and the entry's own details. */
function Detail({ entry }) {
  const d = entry.detail || {};
  const parts = [];
  if (d.method) parts.push(`by ${d.method}`);
  if (d.name && !entry.action.startsWith('console.')) parts.push(`name ${d.name}`);
  const changes = d.changes || {};
  // Fields whose values are not shown (a command, env, secrets) are named; the others show old → new.
  const named = (Array.isArray(d.fields) ? d.fields : []).filter((f) => !(f in changes) && f !== 'worker.env');
  if (named.length > 0) parts.push(`changed: ${named.join(', ')}`);
  for (const [field, change] of Object.entries(changes)) parts.push(`${field} ${JSON.stringify(change.from)} → ${JSON.stringify(change.to)}`);
  for (const kind of ['added', 'removed', 'changed']) if (d.env && d.env[kind] && d.env[kind].length) parts.push(`env ${kind}: ${d.env[kind].join(', ')}`);
  if (typeof d.removed === 'number') parts.push(`${d.removed} jobs removed`);
  if (entry.action.startsWith('job.') && d.endpoint) parts.push(`endpoint ${d.endpoint}`);
  if (d.retryAfterS) parts.push(`retry after ${d.retryAfterS} s`);
  if (d.notRecordedBefore) parts.push(`${d.notRecordedBefore} earlier refusals not recorded`);
  return html`<span>${parts.join('; ') || '—'}</span>`;
}

/** The audit log: admin changes and console sign-ins, newest first, filtered, a page at a time. */
export function AuditPage() {
  const [filters, setFilters] = useState({ action: '', actor: '', target: '' });
  const [entries, setEntries] = useState(null);
  const [cursor, setCursor] = useState(null);
  const [error, setError] = useState(null);
  const query = (next) => {
    const params = new URLSearchParams({ limit: '50' });
    for (const [k, v] of Object.entries(filters)) if (v.trim() !== '') params.set(k, v.trim());
    if (next) params.set('cursor', next);
    return `admin/audit?${params}`;
  };
  const load = (next) => {
    setError(null);
    api(query(next)).then((page) => {
      setEntries((old) => (next && old ? [...old, ...page.entries] : page.entries));
      setCursor(page.nextCursor);
    }, setError);
  };
  useEffect(() => load(null), [filters]);
  const onFilter = (event) => {
    event.preventDefault();
    const form = event.currentTarget;
    setFilters({ action: form.action.value, actor: form.actor.value, target: form.target.value });
  };
  return html`<section aria-labelledby="h-audit"><h1 id="h-audit">Audit log</h1>
    <p class="muted">Every change made through the admin API and every console sign-in: who, when, from where, and what changed. Secret values are never recorded, only that they changed.</p>
    <form class="row" onSubmit=${onFilter} aria-label="Filter the audit log">
      <label>Action <select name="action">${ACTIONS.map(([value, label]) => html`<option value=${value} selected=${filters.action === value}>${label}</option>`)}</select></label>
      <label>Who <input name="actor" placeholder="key name, key id or session" value=${filters.actor} /></label>
      <label>Target <input name="target" placeholder="endpoint or key id" value=${filters.target} /></label>
      <button type="submit">Filter</button></form>
    <${ErrorBox} error=${error} />
    ${entries === null ? html`<p class="loading">Loading…</p>` : entries.length === 0 ? html`<p class="muted">No entries.</p>` : html`<table aria-label="Audit entries">
      <thead><tr><th scope="col">Time</th><th scope="col">Action</th><th scope="col">Outcome</th><th scope="col">Who</th><th scope="col">From</th><th scope="col">Target</th><th scope="col">What changed</th></tr></thead>
      <tbody>${entries.map((e) => html`<tr key=${e.id}><td>${when(e.at)}</td><td><code>${e.action}</code></td><td><span class=${`badge ${OUTCOME_CLASS[e.outcome] || ''}`}>${e.outcome}</span></td>
        <td><${Who} actor=${e.actor} /></td><td>${e.address}</td><td>${e.target ? `${e.target.kind} ${e.target.id}` : '—'}</td><td><${Detail} entry=${e} /></td></tr>`)}</tbody></table>`}
    ${cursor ? html`<button class="secondary" onClick=${() => load(cursor)}>Load older entries</button>` : ''}
  </section>`;
}
