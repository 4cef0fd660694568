import { useEffect, useState } from 'preact/hooks';
import { api, seg } from './api.js';
import { ErrorBox, ms } from './common.js';
import { html } from './html.js';
import { EndpointForm } from './settings-form.js';

/** What /health's counts count, said once where they are shown. */
export const HEALTH_NOTE =
  'Jobs: queued and running now; completed and failed are the finished jobs still kept (their retention: 30 min after /run, 60 s after /runsync). Workers: ready = polling for jobs (idle + running), running = holding a job, starting = started and not yet polling.';

/** The health of one endpoint, as /health answers it, each count named. */
export function Health({ id }) {
  const [health, setHealth] = useState(null);
  useEffect(() => {
    api(`v2/${seg(id)}/health`).then(setHealth, () => setHealth(undefined));
  }, [id]);
  if (health === null) return html`<span class="muted">…</span>`;
  if (health === undefined) return html`<span class="muted">unavailable</span>`;
  return html`<${HealthLine} health=${health} />`;
}

/** Health counts in words: jobs queued, running, done (kept), failed (kept); workers ready, running, starting, unhealthy. */
export function HealthLine({ health }) {
  const { jobs, workers } = health;
  const unhealthy = workers.unhealthy > 0 ? html` <span class="badge s-failed">${workers.unhealthy} unhealthy</span>` : '';
  const throttled = workers.throttled > 0 ? `, ${workers.throttled} throttled` : '';
  return html`<span>jobs: ${jobs.inQueue} queued · ${jobs.inProgress} running · ${jobs.completed} completed · ${jobs.failed} failed</span><br />
    <span class="muted">workers: ${workers.ready} ready, ${workers.running} running, ${workers.initializing} starting${throttled}</span>${unhealthy}`;
}

/** Endpoints: list with health, create, edit; each links to its page. */
export function EndpointsPage() {
  const [list, setList] = useState(null);
  const [error, setError] = useState(null);
  const [editing, setEditing] = useState(null);
  const load = () => api('admin/endpoints').then((r) => setList(r.endpoints), setError);
  useEffect(() => {
    load();
  }, []);
  const done = () => {
    setEditing(null);
    load();
  };
  return html`<section aria-labelledby="h-endpoints">
    <div class="row"><h1 id="h-endpoints">Endpoints</h1><button onClick=${() => setEditing('new')}>New endpoint</button></div>
    ${editing ? html`<${EndpointForm} key=${editing === 'new' ? 'new' : editing.id} endpoint=${editing === 'new' ? null : editing} onDone=${done} />` : ''}
    <${ErrorBox} error=${error} />
    <div class="scroll"><table aria-label="Endpoints"><thead><tr><th scope="col">Endpoint</th><th scope="col">Workers</th><th scope="col">Timeout</th><th scope="col">Health</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
      <tbody>${(list || []).map((e) => html`<tr key=${e.id}>
        <td><a href=${`#/endpoint/${seg(e.id)}`}><strong>${e.id}</strong></a><br /><span class="muted">${e.name}</span></td>
        <td>${e.workersMin}–${e.workersMax}</td><td>${ms(e.executionTimeoutMs)}</td>
        <td><${Health} id=${e.id} /></td>
        <td class="actions"><button class="secondary" onClick=${() => setEditing(e)} aria-label=${`Edit ${e.id}`}>Edit</button>
          <a href=${`#/charts/${seg(e.id)}`}>Charts</a> <a href=${`#/jobs/${seg(e.id)}`}>Jobs</a> <a href=${`#/workers/${seg(e.id)}`}>Workers</a></td></tr>`)}</tbody></table></div>
    <p class="muted">${HEALTH_NOTE}</p>
  </section>`;
}
