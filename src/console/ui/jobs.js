/* global location */
import { useEffect, useState } from 'preact/hooks';
import { api, seg } from './api.js';
import { ConfirmButton } from './confirm.js';
import { openInEditor } from './editor-handoff.js';
import { EndpointPicker, ErrorBox, imagesIn, JsonView, ms, Status, usePoll, useEndpoints, when } from './common.js';
import { html } from './html.js';
import { JobLogs } from './log-view.js';

const PAGE = 20;
const LIVE = new Set(['IN_QUEUE', 'IN_PROGRESS']);
const STATUSES = ['IN_QUEUE', 'IN_PROGRESS', 'COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT'];
/** The time filter's choices: created within the last N minutes (0: any time). */
const SINCE = [
  [0, 'Any time'],
  [15, 'Last 15 minutes'],
  [60, 'Last hour'],
  [1440, 'Last 24 hours'],
  [10080, 'Last 7 days'],
];

/** Whether a job passes the filters: status, created since, and the search text (id, status or worker). */
function passes(j, { status, since, term }) {
  if (status !== '' && j.status !== status) return false;
  if (since > 0 && Date.parse(j.createdAt) < Date.now() - since * 60_000) return false;
  return term === '' || j.id.toLowerCase().includes(term) || j.status.toLowerCase().includes(term) || (j.workerId || '').toLowerCase().includes(term);
}

/** The jobs of an endpoint: newest first, filtered by status and time, searchable by id, worker or status, paginated. */
export function JobsPage({ endpointId }) {
  const { endpoints, error: listError } = useEndpoints();
  const [jobs, setJobs] = useState(null);
  const [error, setError] = useState(null);
  const [search, setSearch] = useState('');
  const [status, setStatus] = useState('');
  const [since, setSince] = useState(0);
  const [page, setPage] = useState(0);
  useEffect(() => {
    setJobs(null);
    setPage(0);
    if (endpointId) api(`v2/${seg(endpointId)}/requests?limit=1000`).then((r) => setJobs(r.requests), setError);
  }, [endpointId]);
  const term = search.trim().toLowerCase();
  const shown = (jobs || []).filter((j) => passes(j, { status, since, term }));
  const pages = Math.max(1, Math.ceil(shown.length / PAGE));
  const rows = shown.slice(page * PAGE, page * PAGE + PAGE);
  return html`<section aria-labelledby="h-jobs"><h1 id="h-jobs">Jobs</h1>
    <div class="row"><${EndpointPicker} endpoints=${endpoints} value=${endpointId || ''} onChange=${(id) => (location.hash = `#/jobs/${seg(id)}`)} />
      <label for="job-search">Search</label><input id="job-search" type="search" value=${search} onInput=${(e) => (setSearch(e.currentTarget.value), setPage(0))} placeholder="id, status or worker" />
      <label>Status <select value=${status} onChange=${(e) => (setStatus(e.currentTarget.value), setPage(0))}><option value="">Any status</option>${STATUSES.map((s) => html`<option value=${s}>${s}</option>`)}</select></label>
      <label>Created <select value=${since} onChange=${(e) => (setSince(Number(e.currentTarget.value)), setPage(0))}>${SINCE.map(([v, l]) => html`<option value=${v}>${l}</option>`)}</select></label></div>
    <${ErrorBox} error=${listError || error} />
    ${endpointId && jobs ? html`<div class="scroll"><table aria-label="Jobs"><thead><tr><th scope="col">Job</th><th scope="col">Status</th><th scope="col">Created</th><th scope="col">Delay</th><th scope="col">Execution</th><th scope="col">Worker</th></tr></thead>
      <tbody>${rows.map((j) => html`<tr key=${j.id}><td><a href=${`#/job/${seg(endpointId)}/${seg(j.id)}`}>${j.id}</a></td><td><${Status} status=${j.status} /></td>
        <td>${when(j.createdAt)}</td><td>${ms(j.delayTime)}</td><td>${ms(j.executionTime)}</td><td>${j.workerId || '—'}</td></tr>`)}</tbody></table></div>
      <nav class="row" aria-label="Pages"><button class="secondary" disabled=${page === 0} onClick=${() => setPage(page - 1)}>Previous</button>
        <span>Page ${page + 1} of ${pages} (${shown.length} ${shown.length === 1 ? 'job' : 'jobs'}${shown.length < (jobs || []).length ? ` of ${jobs.length}` : ''})</span>
        <button class="secondary" disabled=${page + 1 >= pages} onClick=${() => setPage(page + 1)}>Next</button></nav>` : ''}
  </section>`;
}

/**
 * One job: status, times, input (from the job route, so also once the job ended: /status shows it
 * only while live), output or error, images inline, buffered stream chunks, webhook attempts; cancel and retry.
 */
export function JobPage({ endpointId, jobId }) {
  const [job, setJob] = useState(null);
  const [extras, setExtras] = useState(null);
  const [error, setError] = useState(null);
  const [notice, setNotice] = useState('');
  const path = `${seg(endpointId)}/${seg(jobId)}`;
  const load = () =>
    Promise.all([api(`v2/${seg(endpointId)}/status/${seg(jobId)}`), api(`jobs/${path}`)]).then(([j, x]) => {
      setJob(j);
      setExtras(x);
    }, setError);
  // Re-read while the job runs, and after it while its webhook delivery is still under way.
  const pending = extras && extras.webhook && (extras.webhook.outcome === 'pending' || extras.webhook.outcome === 'waiting');
  usePoll(load, 1000, !job || LIVE.has(job.status) || Boolean(pending), [path, job && job.status, pending]);
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
  const resend = async () => {
    setError(null);
    try {
      await api(`admin/endpoints/${seg(endpointId)}/jobs/${seg(jobId)}/webhook`, { method: 'POST', body: {} });
      setNotice('Webhook resent: one more delivery is due.');
      await load();
    } catch (err) {
      setError(err);
    }
  };
  const input = extras && extras.input !== undefined ? extras.input : job && job.input;
  return html`<section aria-labelledby="h-job"><h1 id="h-job">Job ${jobId}</h1>
    <p><a href=${`#/jobs/${seg(endpointId)}`}>← Jobs of ${endpointId}</a></p>
    <${ErrorBox} error=${error} />
    ${notice ? html`<p role="status">${notice}</p>` : ''}
    ${job ? html`<div class="row actions-row">${LIVE.has(job.status) ? html`<${ConfirmButton} label="Cancel job" confirmLabel="Yes, cancel it" question="Cancel this job? Its worker is told to stop." onConfirm=${() => act('cancel')} />` : ''}
        <button class="secondary" onClick=${() => act('retry')} disabled=${job.status !== 'FAILED' && job.status !== 'TIMED_OUT'}>Retry job</button>
        <button class="secondary" disabled=${input === undefined} onClick=${() => openInEditor(endpointId, { input })}>Open in test editor</button></div>
      ${extras && extras.times ? html`<${JobTimes} times=${extras.times} />` : ''}
      ${extras && extras.trace ? html`<${JobTrace} trace=${extras.trace} />` : ''}
      <${JobDetails} job=${withInput(job, extras)} />
      ${extras && extras.input === undefined && job.input === undefined ? html`<p class="muted">Input of ${extras.inputChars.toLocaleString()} characters: too long to show here.</p>` : ''}` : html`<p>Loading…</p>`}
    ${extras && extras.cost ? html`<${JobCost} cost=${extras.cost} />` : ''}
    ${extras ? html`<${StreamChunks} stream=${extras.stream} /><${WebhookAttempts} webhook=${extras.webhook} onResend=${resend} />` : ''}
    ${job ? html`<${JobLogs} jobId=${jobId} live=${LIVE.has(job.status)} />` : ''}
  </section>`;
}

/** When the job was created, started on its worker and finished, each with how long after the one before. */
function JobTimes({ times }) {
  const gap = (a, b) => (a && b ? ` (${ms(Date.parse(b) - Date.parse(a))} later)` : '');
  return html`<h2 id="h-times">Times</h2><dl class="facts" aria-labelledby="h-times">
    <dt>Created</dt><dd><time datetime=${times.createdAt}>${when(times.createdAt)}</time></dd>
    ${times.queuedAt !== times.createdAt ? html`<dt>Queued again</dt><dd><time datetime=${times.queuedAt}>${when(times.queuedAt)}</time></dd>` : ''}
    <dt>Started</dt><dd>${times.startedAt ? html`<time datetime=${times.startedAt}>${when(times.startedAt)}</time>${gap(times.queuedAt, times.startedAt)}` : 'not yet'}</dd>
    <dt>Finished</dt><dd>${times.finishedAt ? html`<time datetime=${times.finishedAt}>${when(times.finishedAt)}</time>${gap(times.startedAt || times.queuedAt, times.finishedAt)}` : 'not yet'}</dd></dl>`;
}

/** The job's trace id (a job submitted while tracing was on), to look its spans up in the tracing backend. */
function JobTrace({ trace }) {
  return html`<h2 id="h-trace">Trace</h2><dl class="facts" aria-labelledby="h-trace">
    <dt>Trace id</dt><dd><code data-trace-id>${trace.traceId}</code>${trace.sampled ? '' : html` <span class="muted">(not sampled: its spans were not exported)</span>`}</dd></dl>`;
}

/** What the job cost: each metered run (a retry is a new run) and the sum; nothing until a run ends. */
function JobCost({ cost }) {
  return html`<h2 id="h-cost">Cost</h2>
    <p><strong>${cost.costUsd} USD</strong>${cost.runs.length === 0 ? ' (no run has ended: a job that never ran costs nothing)' : ''}</p>
    ${cost.runs.length > 1 ? html`<table aria-labelledby="h-cost"><thead><tr><th scope="col">Run</th><th scope="col">Ended</th><th scope="col">Execution</th><th scope="col">Cost (USD)</th></tr></thead>
      <tbody>${cost.runs.map((r) => html`<tr key=${r.run}><td>${r.run + 1}</td><td>${r.status}</td><td>${ms(Math.round(r.executionSeconds * 1000))}</td><td>${r.costUsd}</td></tr>`)}</tbody></table>` : ''}`;
}

/** The job as /status answers it, with the input the job route gave (when /status left it out: the job ended). */
function withInput(job, extras) {
  return job.input === undefined && extras && extras.input !== undefined ? { ...job, input: extras.input } : job;
}

/** The chunks still buffered for the job's stream (shown, not taken: a client reading the stream still gets them). */
export function StreamChunks({ stream, title = 'Stream (buffered chunks)', note = true }) {
  const chunks = stream.chunks || [];
  return html`<h2 id="h-stream">${title}</h2>
    ${note ? html`<p class="muted">Chunks the worker streamed that no client has read yet; a client's read of the stream removes them.</p>` : ''}
    ${chunks.length === 0 ? html`<p>No buffered chunks.</p>` : html`<ol class="chunks" aria-labelledby="h-stream">${chunks.map((c, i) => html`<li key=${i}><code>${JSON.stringify(c)}</code></li>`)}</ol>`}
    ${stream.total > chunks.length ? html`<p class="muted">${stream.total - chunks.length} more buffered, not shown.</p>` : ''}`;
}

const OUTCOMES = {
  waiting: 'Sent when the job ends',
  pending: 'Attempt due',
  delivered: 'Delivered',
  failed: 'Failed (no more attempts)',
  unrecorded: 'Ended (attempts not recorded)',
};

/** The job's webhook delivery: where to (origin only), the outcome, the next attempt, each attempt's status or error class. */
function WebhookAttempts({ webhook, onResend }) {
  if (!webhook) return html`<h2>Webhook</h2><p>No webhook.</p>`;
  const done = webhook.outcome === 'delivered' || webhook.outcome === 'failed' || webhook.outcome === 'unrecorded';
  return html`<div class="row"><h2 id="h-webhook">Webhook</h2>${done && onResend ? html`<button class="secondary" onClick=${onResend}>Resend webhook</button>` : ''}</div>
    <dl class="facts"><dt>Receiver</dt><dd>${webhook.target}</dd>
      <dt>Outcome</dt><dd>${OUTCOMES[webhook.outcome] || webhook.outcome}</dd>
      <dt>Next attempt</dt><dd>${webhook.nextAt ? when(webhook.nextAt) : '—'}</dd></dl>
    ${webhook.attempts.length === 0 ? html`<p>No attempt yet.</p>` : html`<table aria-labelledby="h-webhook"><thead><tr><th scope="col">Attempt</th><th scope="col">Time</th><th scope="col">Result</th></tr></thead>
      <tbody>${webhook.attempts.map((a) => html`<tr key=${`${a.retries}-${a.attempt}`}><td>${a.attempt}${a.retries > 0 ? ` (after retry ${a.retries})` : ''}</td><td>${when(a.at)}</td>
        <td>${a.httpStatus !== null ? `HTTP ${a.httpStatus}` : a.error}${a.delivered ? ' — delivered' : ''}</td></tr>`)}</tbody></table>`}`;
}

/**
 * An image named in a job's output. The gateway's own images (same origin, or data:) show at
 * once; an image elsewhere is loaded only when asked, since loading it tells its host that this
 * job was opened and when (a worker or a run key could plant a tracking pixel for an admin).
 */
function OutputImage({ src }) {
  const [asked, setAsked] = useState(false);
  const url = new URL(src, location.href);
  if (url.protocol === 'data:' || url.origin === location.origin || asked) return html`<img class="result" src=${src} alt="Image in the job's output" />`;
  return html`<p class="remote-image">An image at <code>${url.host}</code>, not served by this gateway: loading it tells that host you opened this job.
    <button type="button" class="secondary" onClick=${() => setAsked(true)}>Load image from ${url.host}</button></p>`;
}

/** A job's fields as the status route answers them. */
export function JobDetails({ job }) {
  const images = job.output === undefined ? [] : imagesIn(job.output);
  return html`<dl class="facts" aria-live="polite">
      <dt>Status</dt><dd><${Status} status=${job.status} /></dd>
      <dt>Delay</dt><dd>${ms(job.delayTime)}</dd><dt>Execution</dt><dd>${ms(job.executionTime)}</dd>
      <dt>Worker</dt><dd>${job.workerId || '—'}</dd><dt>Retries</dt><dd>${job.retries ?? 0}</dd><dt>Attempts</dt><dd>${job.attempts ?? 0}</dd></dl>
    ${job.input !== undefined ? html`<h2>Input</h2><${JsonView} value=${job.input} label="Input" />` : ''}
    ${job.output !== undefined && LIVE.has(job.status) ? html`<h2>Progress</h2><${JsonView} value=${job.output} label="Progress" />` : ''}
    ${job.output !== undefined && !LIVE.has(job.status) ? html`<h2>Output</h2><${JsonView} value=${job.output} label="Output" />` : ''}
    ${images.map((src) => html`<${OutputImage} key=${src} src=${src} />`)}
    ${job.error !== undefined ? html`<h2>Error</h2><pre class="json error-text" tabindex="0">${typeof job.error === 'string' ? job.error : JSON.stringify(job.error, null, 2)}</pre>` : ''}`;
}
