/* global EventSource, AbortController, setInterval, clearInterval */
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, seg } from './api.js';
import { EndpointPicker, ErrorBox, ms, usePoll, useEndpoints } from './common.js';
import { takeHandoff } from './editor-handoff.js';
import { JobDetails, StreamChunks } from './jobs.js';
import { html } from './html.js';

const LIVE = new Set(['IN_QUEUE', 'IN_PROGRESS']);
/** The editor shows the latest chunks of a stream, no more. */
const MAX_CHUNKS = 200;

/** A sample body for an endpoint: a prompt for the image endpoints, a plain object otherwise. */
function sampleFor(endpoint) {
  if (endpoint && /image/i.test(endpoint.name || '')) return { input: { prompt: 'a lighthouse on a cliff at dusk, oil painting', width: 512, height: 512 } };
  return { input: { message: 'hello from the console' } };
}

const wait = (msDelay) => new Promise((resolve) => setTimeout(resolve, msDelay));

/**
 * Follows the job live through the stream route as server-sent events (the session cookie goes
 * along; no key): `status` events while it is live, one message per chunk, `done` with the
 * finished job. Resolves true at `done`, false when the stream failed before it (the caller
 * then polls). Chunks this reads are drained, as for any reader of the stream.
 */
function followLive(endpointId, id, onJob, onChunk, signal) {
  return new Promise((resolve) => {
    const events = new EventSource(streamUrl(endpointId, id));
    const end = (ok) => {
      events.close();
      resolve(ok);
    };
    // Leaving the page stops following: the stream is closed, nothing polls.
    signal.addEventListener('abort', () => end(true), { once: true });
    // A status event says {id, status, attempt}: merged into what is known (worker, delay, progress stay).
    events.addEventListener('status', (e) => onJob(JSON.parse(e.data), true));
    events.addEventListener('message', (e) => onChunk(JSON.parse(e.data).output));
    events.addEventListener('done', (e) => {
      onJob(JSON.parse(e.data));
      end(true);
    });
    // Any error (refused, cut off): no reconnect here; polling takes over.
    events.addEventListener('error', () => end(false));
  });
}

/** The console API's stream route of a job (what an EventSource opens). */
export const streamUrl = (endpointId, id) => `/console/api/v2/${seg(endpointId)}/stream/${seg(id)}`;

/** The fallback: polls the stream route (JSON, chunks drained) and the status until the job is finished. */
async function poll(endpointId, id, onJob, onChunk, signal) {
  while (!signal.aborted) {
    const read = await api(`v2/${seg(endpointId)}/stream/${seg(id)}?wait=0`);
    for (const item of read.stream) onChunk(item.output);
    if (!LIVE.has(read.status)) {
      onJob(await api(`v2/${seg(endpointId)}/status/${seg(id)}`));
      return;
    }
    onJob({ id, status: read.status }, true);
    await wait(500);
  }
}

/** Milliseconds since `from` while `running`, re-rendered every 200 ms; read once more at each change of `status`, then frozen. */
function useElapsed(from, running, status) {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    setNow(Date.now());
    if (!running) return undefined;
    const timer = setInterval(() => setNow(Date.now()), 200);
    return () => clearInterval(timer);
  }, [from, running, status]);
  return from === null ? null : Math.max(0, now - from);
}

/** The running job as it goes: its worker, delay, elapsed time and a cancel button. */
function LiveLine({ job, elapsed, onCancel }) {
  return html`<div class="row live" aria-label="Live">
    <span>Worker: <strong>${job.workerId || 'not yet taken'}</strong></span>
    <span>Delay: <strong>${job.delayTime !== undefined ? ms(job.delayTime) : 'in the queue'}</strong></span>
    <span>Elapsed: <strong aria-label="Elapsed">${ms(elapsed)}</strong></span>
    <button class="danger" onClick=${onCancel}>Cancel job</button></div>`;
}

/** The test editor: send a body to an endpoint as run or runsync with the session; watch it finish, live. */
export function EditorPage({ endpointId: routeEndpoint }) {
  const { endpoints, error: listError } = useEndpoints();
  const [endpointId, setEndpointId] = useState(routeEndpoint || '');
  const [body, setBody] = useState(() => {
    const handed = routeEndpoint ? takeHandoff(routeEndpoint) : null;
    return JSON.stringify(handed || sampleFor(null), null, 2);
  });
  const [job, setJobState] = useState(null);
  const [chunks, setChunks] = useState([]);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const [sentAt, setSentAt] = useState(null);
  const following = useRef(null);
  useEffect(() => () => following.current?.abort(), []);
  // A partial update (a status event) keeps what the status route told (worker, delay, progress).
  const setJob = (next, partial = false) => setJobState((prev) => (partial && prev && prev.id === next.id ? { ...prev, ...next } : next));
  const live = Boolean(job && LIVE.has(job.status));
  const elapsed = useElapsed(sentAt, live, job && job.status);
  // While the job runs, its status route says who took it, its delay and its progress output.
  usePoll(
    () => api(`v2/${seg(endpointId)}/status/${seg(job.id)}`).then((s) => setJobState((prev) => (prev && prev.id === s.id && LIVE.has(prev.status) ? { ...prev, ...s } : prev)), () => {}),
    1000,
    live,
    [job && job.id],
  );
  const cancel = async () => {
    try {
      setJob(await api(`v2/${seg(endpointId)}/cancel/${seg(job.id)}`, { method: 'POST', body: {} }), true);
    } catch (err) {
      setError(err);
    }
  };
  const pick = (id) => {
    setEndpointId(id);
    setBody(JSON.stringify(sampleFor((endpoints || []).find((e) => e.id === id)), null, 2));
  };
  const send = async (mode) => {
    setError(null);
    setJob(null);
    setChunks([]);
    let parsed;
    try {
      parsed = JSON.parse(body);
    } catch (err) {
      setError(new Error(`The body is not JSON: ${err.message}`));
      return;
    }
    setBusy(true);
    setSentAt(Date.now());
    try {
      const first = await api(`v2/${seg(endpointId)}/${mode}`, { method: 'POST', body: parsed });
      setJob(first);
      if (LIVE.has(first.status)) {
        const onChunk = (chunk) => setChunks((shown) => [...shown, chunk].slice(-MAX_CHUNKS));
        following.current?.abort();
        const { signal } = (following.current = new AbortController());
        if (!(await followLive(endpointId, first.id, setJob, onChunk, signal))) await poll(endpointId, first.id, setJob, onChunk, signal);
      }
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return html`<section aria-labelledby="h-editor"><h1 id="h-editor">Test editor</h1>
    <p class="muted">Requests go out with your console session, no API key needed; their usage is recorded like any other.</p>
    <${EndpointPicker} id="editor-endpoint" endpoints=${endpoints} value=${endpointId} onChange=${pick} />
    <label for="editor-body">Request body (JSON)</label>
    <textarea id="editor-body" rows="10" spellcheck="false" value=${body} onInput=${(e) => setBody(e.currentTarget.value)}></textarea>
    <div class="row"><button disabled=${!endpointId || busy} onClick=${() => send('run')}>Send as run</button>
      <button class="secondary" disabled=${!endpointId || busy} onClick=${() => send('runsync')}>Send as runsync</button>
      ${busy ? html`<span role="status">Waiting for the result…</span>` : ''}</div>
    <${ErrorBox} error=${listError || error} />
    ${job ? html`<div class="card" aria-label="Result"><h2>Job <a href=${`#/job/${seg(endpointId)}/${seg(job.id)}`}>${job.id}</a></h2>
      ${live ? html`<${LiveLine} job=${job} elapsed=${elapsed} onCancel=${cancel} />` : html`<p class="muted">Took ${ms(elapsed)} from sending to the answer.</p>`}
      <${JobDetails} job=${job} />
      ${chunks.length > 0 ? html`<${StreamChunks} stream=${{ chunks, total: chunks.length }} title="Stream" note=${false} />` : ''}</div>` : ''}
  </section>`;
}
