// Worker log lines as the console shows them (docs/logs.md): time, level and message first,
// wrapped rather than cut off; a JSON line's raw fields behind a toggle (a <details> per line).
import { useEffect, useState } from 'preact/hooks';
import { api, seg } from './api.js';
import { ErrorBox, usePoll } from './common.js';
import { html } from './html.js';

/** The line's JSON object pretty-printed, or null when the line is not a JSON object. */
function rawJson(line) {
  if (!line.startsWith('{')) return null;
  try {
    const value = JSON.parse(line);
    return value && typeof value === 'object' && !Array.isArray(value) ? JSON.stringify(value, null, 2) : null;
  } catch {
    return null;
  }
}

/** `15:04:05.123` of an ISO time; the whole time stays in the tooltip. */
const clock = (iso) => iso.slice(11, 23);

/** One line: time, level, (worker), message; a JSON line can be opened to show its fields. */
function LogRow({ line, showWorker }) {
  const level = line.level || (line.stream === 'gantry' ? 'gantry' : line.stream === 'stderr' ? 'stderr' : '');
  const head = html`<time datetime=${line.at} title=${line.at}>${clock(line.at)}</time>
    <span class=${`lvl lvl-${level || 'none'}`}>${level}</span>
    ${showWorker ? html`<code class="muted">${line.workerId}</code>` : ''}
    <span class="msg">${line.message ?? line.line}</span>`;
  const raw = rawJson(line.line);
  if (!raw) return html`<li class=${`log-line s-${line.stream}`}>${head}</li>`;
  return html`<li class=${`log-line s-${line.stream}`}><details><summary>${head} <span class="muted">JSON</span></summary><pre class="json">${raw}</pre></details></li>`;
}

/** A list of stored log lines, oldest first. */
export function LogLines({ lines, showWorker = false, label }) {
  if (!lines) return html`<p>Loading…</p>`;
  if (lines.length === 0) return html`<p class="muted">No lines.</p>`;
  return html`<ol class="log-lines" tabindex="0" aria-label=${label} aria-live="polite">${lines.map((l) => html`<${LogRow} key=${l.id ?? `${l.at}-${l.line}`} line=${l} showWorker=${showWorker} />`)}</ol>`;
}

/** The lines printed for one job (while its worker held it, or naming it), re-read every 2 s while it runs. */
export function JobLogs({ jobId, live }) {
  const [lines, setLines] = useState(null);
  const [error, setError] = useState(null);
  const load = () => api(`admin/logs?job=${seg(jobId)}&limit=1000`).then((r) => (setLines(r.lines), setError(null)), setError);
  usePoll(load, 2000, live, [jobId]);
  useEffect(() => {
    if (!live) load();
  }, [jobId, live]);
  return html`<h2 id="h-job-logs">Worker log</h2><${ErrorBox} error=${error} /><${LogLines} lines=${lines} showWorker=${true} label=${`Log lines of job ${jobId}`} />`;
}
