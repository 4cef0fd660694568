/* global URLSearchParams */
import { useEffect, useState } from 'preact/hooks';
import { api } from './api.js';
import { ErrorBox } from './common.js';
import { html } from './html.js';

const DAY = 86_400_000;
const isoDay = (t) => new Date(t).toISOString().slice(0, 10);

/** Usage: jobs, megapixels and cost by key or endpoint over a period. */
export function UsagePage() {
  const [from, setFrom] = useState(isoDay(Date.now() - 30 * DAY));
  const [to, setTo] = useState(isoDay(Date.now() + DAY));
  const [groupBy, setGroupBy] = useState('endpoint');
  const [data, setData] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    setError(null);
    api(`admin/usage?${new URLSearchParams({ from, to, groupBy })}`).then(setData, setError);
  }, [from, to, groupBy]);
  const max = Math.max(1e-12, ...(data ? data.usage.map((u) => u.cost) : [0]));
  return html`<section aria-labelledby="h-usage"><h1 id="h-usage">Usage</h1>
    <div class="row"><label>From <input type="date" value=${from} onChange=${(e) => setFrom(e.currentTarget.value)} /></label>
      <label>To <input type="date" value=${to} onChange=${(e) => setTo(e.currentTarget.value)} /></label>
      <label>By <select value=${groupBy} onChange=${(e) => setGroupBy(e.currentTarget.value)}><option value="endpoint">endpoint</option><option value="key">key</option></select></label></div>
    <${ErrorBox} error=${error} />
    ${data ? html`<table><thead><tr><th scope="col">${groupBy}</th><th scope="col">Jobs</th><th scope="col">Megapixels</th><th scope="col">Cost (USD)</th><th scope="col"><span class="sr-only">Share</span></th></tr></thead>
      <tbody>${data.usage.map((u) => html`<tr><td>${u[groupBy]}</td><td>${u.jobs}</td><td>${u.megapixels}</td><td>${u.costUsd}</td>
        <td class="barcell"><span class="bar" style=${{ width: `${Math.round((100 * u.cost) / max)}%` }}></span></td></tr>`)}</tbody>
      <tfoot><tr><th scope="row">Total</th><td>${data.total.jobs}</td><td>${data.total.megapixels}</td><td>${data.total.costUsd}</td><td></td></tr></tfoot></table>` : ''}
  </section>`;
}
