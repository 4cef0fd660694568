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

/** One uPlot time chart of the given series ([label, pick(point), colour variable]). */
function Chart({ title, points, series, unit }) {
  const box = useRef(null);
  const scheme = useScheme();
  useEffect(() => {
    if (!box.current || !points) return undefined;
    const fg = cssVar('--fg');
    const grid = cssVar('--line');
    const data = [points.map((p) => p.t / 1000), ...series.map(([, pick]) => points.map(pick))];
    const axis = { stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid } };
    const opts = {
      width: Math.max(280, box.current.clientWidth),
      height: 200,
      series: [{}, ...series.map(([label, , colour]) => ({ label, stroke: cssVar(colour), width: 2, spanGaps: false, points: { show: unit !== '', size: 6, fill: cssVar(colour) }, value: (u, v) => (v === null || v === undefined ? '—' : `${v}${unit}`) }))],
      axes: [axis, { ...axis, size: 70, values: (u, vals) => vals.map((v) => `${v}${unit}`) }],
      scales: { y: { range: (u, min, max) => [0, Math.max(1, max ?? 1)] } },
    };
    const plot = new uPlot(opts, data, box.current);
    const resize = new ResizeObserver(() => plot.setSize({ width: Math.max(280, box.current ? box.current.clientWidth : 280), height: 200 }));
    resize.observe(box.current);
    return () => (resize.disconnect(), plot.destroy());
  }, [points, scheme]);
  return html`<figure class="card chart" aria-label=${title}><figcaption><strong>${title}</strong></figcaption><div ref=${box}></div></figure>`;
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
      <${Chart} title="Queue depth (deepest per minute)" points=${points} unit="" series=${[['queued', (p) => p.queueDepth, '--accent']]} />
      <${Chart} title="Throughput (jobs per minute)" points=${points} unit="" series=${[['submitted', (p) => p.submitted, '--accent'], ['completed', (p) => p.completed, '--ok'], ['failed', (p) => p.failed, '--danger']]} />
      <${Chart} title="Delay time (queue), ms" points=${points} unit=" ms" series=${pct('delay')} />
      <${Chart} title="Execution time, ms" points=${points} unit=" ms" series=${pct('execution')} />
    </div>` : ''}
  </section>`;
}
