/* global location */
import { useEffect, useState } from 'preact/hooks';
import { api, seg } from './api.js';
import { EndpointPicker, ErrorBox, imagesIn, JsonView, ms, Status, usePoll, useEndpoints, when } from './common.js';
import { html } from './html.js';

const PAGE = 20;
const LIVE = new Set(['IN_QUEUE', 'IN_PROGRESS']);

/** The jobs of an endpoint: newest first, searchable by id, worker or status, paginated. */
export function JobsPage({ endpointId }) {
  const { endpoints, error: listError } = useEndpoints();
  const [jobs, setJobs] = useState(null);
  const [error, setError] = useState(null);
  const [search, setSearch] = useState('');
  const [page, setPage] = useState(0);
  useEffect(() => {
    setJobs(null);
    setPage(0);
    if (endpointId) api(`v2/${seg(endpointId)}/requests?limit=1000`).then((r) => setJobs(r.requests), setError);
  }, [endpointId]);
  const term = search.trim().toLowerCase();
  const shown = (jobs || []).filter((j) => term === '' || j.id.toLowerCase().includes(term) || j.status.toLowerCase().includes(term) || (j.workerId || '').toLowerCase().includes(term));
  const pages = Math.max(1, Math.ceil(shown.length / PAGE));
  const rows = shown.slice(page * PAGE, page * PAGE + PAGE);
  return html`<section aria-labelledby="h-jobs"><h1 id="h-jobs">Jobs</h1>
    <div class="row"><${EndpointPicker} endpoints=${endpoints} value=${endpointId || ''} onChange=${(id) => (location.hash = `#/jobs/${seg(id)}`)} />
      <label for="job-search">Search</label><input id="job-search" type="search" value=${search} onInput=${(e) => (setSearch(e.currentTarget.value), setPage(0))} placeholder="id, status or worker" /></div>
    <${ErrorBox} error=${listError || error} />
    ${endpointId && jobs ? html`<table><thead><tr><th scope="col">Job</th><th scope="col">Status</th><th scope="col">Created</th><th scope="col">Delay</th><th scope="col">Execution</th><th scope="col">Worker</th></tr></thead>
      <tbody>${rows.map((j) => html`<tr key=${j.id}><td><a href=${`#/job/${seg(endpointId)}/${seg(j.id)}`}>${j.id}</a></td><td><${Status} status=${j.status} /></td>
        <td>${when(j.createdAt)}</td><td>${ms(j.delayTime)}</td><td>${ms(j.executionTime)}</td><td>${j.workerId || '—'}</td></tr>`)}</tbody></table>
      <nav class="row" aria-label="Pages"><button class="secondary" disabled=${page === 0} onClick=${() => setPage(page - 1)}>Previous</button>
        <span>Page ${page + 1} of ${pages} (${shown.length} jobs)</span>
        <button class="secondary" disabled=${page + 1 >= pages} onClick=${() => setPage(page + 1)}>Next</button></nav>` : ''}
  </section>`;
}

/** One job: status, times, input while live, output or error, images inline; cancel and retry. */
export function JobPage({ endpointId, jobId }) {
  const [job, setJob] = useState(null);
  const [error, setError] = useState(null);
  const [notice, setNotice] = useState('');
  const path = `${seg(endpointId)}/${seg(jobId)}`;
  const load = () => api(`v2/${seg(endpointId)}/status/${seg(jobId)}`).then(setJob, setError);
  usePoll(load, 1000, !job || LIVE.has(job.status), [path, job && job.status]);
  const act = async (action) => {
    setError(null);
    try {
      const r = await api(`v2/${seg(endpointId)}/${action}/${seg(jobId)}`, { method: 'POST', body: {} });
      setNotice(`${action === 'cancel' ? 'Cancelled' : 'Retried'}: ${r.status}`);
      await load();
    } catch (err) {
      setError(err);
    }
  };
  return html`<section aria-labelledby="h-job"><h1 id="h-job">Job ${jobId}</h1>
    <p><a href=${`#/jobs/${seg(endpointId)}`}>← Jobs of ${endpointId}</a></p>
    <${ErrorBox} error=${error} />
    ${notice ? html`<p role="status">${notice}</p>` : ''}
    ${job ? html`<${JobDetails} job=${job} />
      <div class="row"><button onClick=${() => act('cancel')} disabled=${!LIVE.has(job.status)}>Cancel job</button>
        <button class="secondary" onClick=${() => act('retry')} disabled=${job.status !== 'FAILED' && job.status !== 'TIMED_OUT'}>Retry job</button></div>` : html`<p>Loading…</p>`}
  </section>`;
}

/** A job's fields as the status route answers them. */
export function JobDetails({ job }) {
  const images = job.output === undefined ? [] : imagesIn(job.output);
  return html`<dl class="facts" aria-live="polite">
      <dt>Status</dt><dd><${Status} status=${job.status} /></dd>
      <dt>Delay</dt><dd>${ms(job.delayTime)}</dd><dt>Execution</dt><dd>${ms(job.executionTime)}</dd>
      <dt>Worker</dt><dd>${job.workerId || '—'}</dd><dt>Retries</dt><dd>${job.retries ?? 0}</dd></dl>
    ${job.input !== undefined ? html`<h2>Input</h2><${JsonView} value=${job.input} label="Input" />` : ''}
    ${job.output !== undefined ? html`<h2>Output</h2><${JsonView} value=${job.output} label="Output" />` : ''}
    ${images.map((src) => html`<img class="result" src=${src} alt="Image in the job's output" />`)}
    ${job.error !== undefined ? html`<h2>Error</h2><pre class="json error-text" tabindex="0">${typeof job.error === 'string' ? job.error : JSON.stringify(job.error, null, 2)}</pre>` : ''}`;
}
