import { useState } from 'preact/hooks';
import { api, seg } from './api.js';
import { EndpointPicker, ErrorBox, useEndpoints } from './common.js';
import { JobDetails } from './jobs.js';
import { html } from './html.js';

const LIVE = new Set(['IN_QUEUE', 'IN_PROGRESS']);

/** A sample body for an endpoint: a prompt for the image endpoints, a plain object otherwise. */
function sampleFor(endpoint) {
  if (endpoint && /image/i.test(endpoint.name || '')) return { input: { prompt: 'a lighthouse on a cliff at dusk, oil painting', width: 512, height: 512 } };
  return { input: { message: 'hello from the console' } };
}

const wait = (msDelay) => new Promise((resolve) => setTimeout(resolve, msDelay));

/** Polls the job until it is finished, telling `onJob` each state. */
async function follow(endpointId, id, onJob) {
  for (;;) {
    const job = await api(`v2/${seg(endpointId)}/status/${seg(id)}`);
    onJob(job);
    if (!LIVE.has(job.status)) return;
    await wait(500);
  }
}

/** The test editor: send a body to an endpoint as run or runsync with the session; watch it finish. */
export function EditorPage() {
  const { endpoints, error: listError } = useEndpoints();
  const [endpointId, setEndpointId] = useState('');
  const [body, setBody] = useState(JSON.stringify(sampleFor(null), null, 2));
  const [job, setJob] = useState(null);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const pick = (id) => {
    setEndpointId(id);
    setBody(JSON.stringify(sampleFor((endpoints || []).find((e) => e.id === id)), null, 2));
  };
  const send = async (mode) => {
    setError(null);
    setJob(null);
    let parsed;
    try {
      parsed = JSON.parse(body);
    } catch (err) {
      setError(new Error(`The body is not JSON: ${err.message}`));
      return;
    }
    setBusy(true);
    try {
      const first = await api(`v2/${seg(endpointId)}/${mode}`, { method: 'POST', body: parsed });
      setJob(first);
      if (LIVE.has(first.status)) await follow(endpointId, first.id, setJob);
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
    ${job ? html`<div class="card" aria-label="Result"><h2>Job <a href=${`#/job/${seg(endpointId)}/${seg(job.id)}`}>${job.id}</a></h2><${JobDetails} job=${job} /></div>` : ''}
  </section>`;
}
