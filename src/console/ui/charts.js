/* global getComputedStyle, document, ResizeObserver, location, matchMedia */
import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import { api, seg } from './api.js';
import { EndpointPicker, ErrorBox, usePoll, useEndpoints } from './common.js';
import { html } from './html.js';

const SPANS = [
  [60, 'Last hour'],
  [360, 'Last 6 hours'],
  [1440, 'Last 24 hours'],
];

const cssVar = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim() || '#888';

/** 'dark' or 'light', following the system's preference as it changes (the charts redraw in its colours). */
function useScheme() {
  const query = matchMedia('(prefers-color-scheme: dark)');
  const [dark, setDark] = useState(query.matches);
  useEffect(() => {
    const onChange = (e) => setDark(e.matches);
    query.addEventListener('change', onChange);
    return () => query.removeEventListener('change', onChange);
  }, []);
  return dark ? 'dark' : 'light';
}

/**
 * The unit a chart of durations (ms) reads best in, from its largest value: ms below 1 s, s
 * below 2 min, min above (a 5-minute execution is "5 min", not "300000 ms").
 *
 * @example durationUnit(90_000) // { unit: 's', per: 1000 }
 */
export function durationUnit(maxMs) {
  if (maxMs < 1000) return { unit: 'ms', per: 1 };
  if (maxMs < 120_000) return { unit: 's', per: 1000 };
  return { unit: 'min', per: 60_000 };
}

/** Ticks of a count: whole numbers only (no "0.25 jobs"). */
const COUNT_TICKS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 20_000, 50_000, 100_000, 1_000_000];

/** A tick or legend number without float noise (0.30000000000000004 → 0.3). */
const tidy = (v) => String(Number(v.toFixed(3)));

/** Room for the y axis: its widest label, at about 7.5 px a character of the 12 px axis font, plus the ticks. */
const axisSize = (u, values) => (values ? Math.max(...values.map((v) => String(v).length), 2) * 7.5 + 18 : 40);

/** One uPlot time chart of the given series ([label, pick(point), colour variable]); `duration`: the values are ms, shown in the unit that fits. */
function Chart({ title, points, series, duration }) {
  const box = useRef(null);
  const scheme = useScheme();
  const raw = points ? series.map(([, pick]) => points.map(pick)) : [];
  const { unit, per } = duration ? durationUnit(Math.max(0, ...raw.flat().filter((v) => v !== null && v !== undefined))) : { unit: '', per: 1 };
  useEffect(() => {
    if (!box.current || !points) return undefined;
    const fg = cssVar('--fg');
    const grid = cssVar('--line');
    const data = [points.map((p) => p.t / 1000), ...raw.map((values) => values.map((v) => (v === null || v === undefined ? v : v / per)))];
    const axis = { stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid }, font: '12px system-ui, sans-serif' };
    const suffix = unit === '' ? '' : ` ${unit}`;
    const opts = {
      width: Math.max(280, box.current.clientWidth),
      height: 200,
      // Room at the top and right, so the top tick's label and the last time label are not cut.
      padding: [12, 18, 0, 0],
      series: [{}, ...series.map(([label, , colour]) => ({ label, stroke: cssVar(colour), width: 2, spanGaps: false, points: { show: duration, size: 6, fill: cssVar(colour) }, value: (u, v) => (v === null || v === undefined ? '—' : `${tidy(v)}${suffix}`) }))],
      axes: [axis, { ...axis, size: axisSize, values: (u, vals) => vals.map((v) => `${tidy(v)}${suffix}`), ...(duration ? {} : { incrs: COUNT_TICKS }) }],
      scales: { y: { range: (u, min, max) => [0, Math.max(duration ? 1 / per : 1, max ?? 1)] } },
    };
    const plot = new uPlot(opts, data, box.current);
    const resize = new ResizeObserver(() => plot.setSize({ width: Math.max(280, box.current ? box.current.clientWidth : 280), height: 200 }));
    resize.observe(box.current);
    return () => (resize.disconnect(), plot.destroy());
  }, [points, scheme]);
  return html`<figure class="card chart" aria-label=${title} data-unit=${unit}><figcaption><strong>${title}</strong>${unit ? html` <span class="muted">(${unit})</span>` : ''}</figcaption><div ref=${box}></div></figure>`;
}

/** Charts of an endpoint over time: queue depth, throughput, delay and execution p70/p90/p98. */
export function ChartsPage({ endpointId }) {
  const { endpoints, error: listError } = useEndpoints();
  const [span, setSpan] = useState(60);
  const [points, setPoints] = useState(null);
  const [error, setError] = useState(null);
  const load = () => api(`charts/${seg(endpointId)}?minutes=${span}`).then((r) => (setPoints(r.points), setError(null)), setError);
  usePoll(load, 15_000, Boolean(endpointId), [endpointId, span]);
  const pct = (kind) => [
    ['p70', (p) => p[kind].p70, '--ok'],
    ['p90', (p) => p[kind].p90, '--warn'],
    ['p98', (p) => p[kind].p98, '--danger'],
  ];
  return html`<section aria-labelledby="h-charts"><h1 id="h-charts">Charts</h1>
    <div class="row"><${EndpointPicker} endpoints=${endpoints} value=${endpointId || ''} onChange=${(id) => (location.hash = `#/charts/${seg(id)}`)} />
      <label>Period <select value=${span} onChange=${(e) => setSpan(Number(e.currentTarget.value))}>${SPANS.map(([v, l]) => html`<option value=${v}>${l}</option>`)}</select></label></div>
    <${ErrorBox} error=${listError || error} />
    ${endpointId && points ? html`<div class="charts">
      <${Chart} title="Queue depth (deepest per minute)" points=${points} series=${[['queued', (p) => p.queueDepth, '--accent']]} />
      <${Chart} title="Throughput (jobs per minute)" points=${points} series=${[['submitted', (p) => p.submitted, '--accent'], ['completed', (p) => p.completed, '--ok'], ['failed', (p) => p.failed, '--danger']]} />
      <${Chart} title="Delay time (queue)" points=${points} duration=${true} series=${pct('delay')} />
      <${Chart} title="Execution time" points=${points} duration=${true} series=${pct('execution')} />
    </div>
    <p class="muted">Queue depth: the deepest the queue was in each minute, followed job by job between the gateway's 10-second samples (a burst taken within seconds still shows). Throughput: jobs submitted, completed, and failed (failed, timed out or cancelled) in each minute. Delay and execution: the 70th, 90th and 98th percentile of the jobs that started or ended in the minute.</p>
    ` : ''}
  </section>`;
}
