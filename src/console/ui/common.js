/* global setInterval, clearInterval */
import { useEffect, useState } from 'preact/hooks';
import { api } from './api.js';
import { html } from './html.js';

/** An error line (role=alert, so screen readers announce it); nothing when there is none. */
export function ErrorBox({ error }) {
  if (!error) return null;
  const field = error.body && error.body.field ? ` (field: ${error.body.field})` : '';
  return html`<p class="error" role="alert">${error.message}${field}</p>`;
}

/** Runs `fn` now and every `ms` while `active`; stops on unmount. */
export function usePoll(fn, ms, active, deps) {
  useEffect(() => {
    if (!active) return undefined;
    fn();
    const timer = setInterval(fn, ms);
    return () => clearInterval(timer);
  }, [active, ms, ...deps]);
}

/** The endpoints (id, name), loaded once per mount. */
export function useEndpoints() {
  const [endpoints, setEndpoints] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    api('admin/endpoints').then((r) => setEndpoints(r.endpoints), setError);
  }, []);
  return { endpoints, error };
}

/** A labelled endpoint select. */
export function EndpointPicker({ endpoints, value, onChange, id = 'endpoint-pick' }) {
  return html`<label for=${id}>Endpoint</label>
    <select id=${id} value=${value} onChange=${(e) => onChange(e.currentTarget.value)}>
      <option value="">Choose an endpoint…</option>
      ${(endpoints || []).map((e) => html`<option value=${e.id}>${e.id}${e.name && e.name !== e.id ? ` — ${e.name}` : ''}</option>`)}
    </select>`;
}

/** Pretty JSON in a scrollable, focusable block. */
export function JsonView({ value, label }) {
  return html`<pre class="json" tabindex="0" aria-label=${label}>${JSON.stringify(value, null, 2)}</pre>`;
}

/** Milliseconds as a short duration. */
export function ms(value) {
  if (value === null || value === undefined) return '—';
  return value < 1000 ? `${value} ms` : `${(value / 1000).toFixed(2)} s`;
}

/** An ISO time as local date and time. */
export function when(iso) {
  return iso ? new Date(iso).toLocaleString() : '—';
}

/** A job status as a coloured badge. */
export function Status({ status }) {
  return html`<span class=${`badge s-${String(status).toLowerCase()}`}>${status}</span>`;
}

/** Image URLs (http(s) or data:image) anywhere in a job's output, to show inline. */
export function imagesIn(value, found = []) {
  if (typeof value === 'string') {
    if (/^data:image\//.test(value) || /^(https?:\/\/|\/files\/)[^\s]+\.(png|jpe?g|webp)(\?|$)/i.test(value)) found.push(value);
  } else if (Array.isArray(value)) {
    for (const v of value) imagesIn(v, found);
  } else if (value && typeof value === 'object') {
    for (const v of Object.values(value)) imagesIn(v, found);
  }
  return found;
}
