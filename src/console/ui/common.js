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
      ${(endpoints || []).map((e) => html`<option value=${e.id} selected=${e.id === value}>${e.id}${e.name && e.name !== e.id ? ` — ${e.name}` : ''}</option>`)}
    </select>`;
}

/** Pretty JSON in a scrollable, focusable block. */
export function JsonView({ value, label }) {
  return html`<pre class="json" tabindex="0" aria-label=${label}>${JSON.stringify(value, null, 2)}</pre>`;
}

/**
 * Milliseconds as a duration in the unit a person reads it in: `850 ms`, `2.5 s`, `10 min`,
 * `1 min 30 s`, `2 h 5 min`, `7 days` (a setting of 600000 ms is `10 min`, not `600.00 s`).
 */
export function ms(value) {
  if (value === null || value === undefined) return '—';
  if (value < 1000) return `${value} ms`;
  if (value < 60_000) return `${Number((value / 1000).toFixed(value < 10_000 ? 2 : 1))} s`;
  const parts = (big, bigUnit, small, smallUnit) => (small === 0 ? `${big} ${bigUnit}` : `${big} ${bigUnit} ${small} ${smallUnit}`);
  const s = Math.round(value / 1000);
  if (s < 3600) return parts(Math.floor(s / 60), 'min', s % 60, 's');
  const min = Math.round(s / 60);
  if (min < 24 * 60) return parts(Math.floor(min / 60), 'h', min % 60, 'min');
  const h = Math.round(min / 60);
  const days = Math.floor(h / 24);
  return parts(days, days === 1 ? 'day' : 'days', h % 24, 'h');
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
