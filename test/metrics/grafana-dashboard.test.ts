// docs/grafana-dashboard.json may only query metrics a gateway serves: every metric name in
// its queries is looked up in a real /metrics.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { scrape } from './scrape.js';

interface Panel {
  type: string;
  title: string;
  targets?: { expr: string }[];
}

let t: TestGantry;
beforeAll(async () => {
  t = await startTestGantry();
});
afterAll(async () => {
  await t?.close();
});

it('every metric the dashboard queries is one /metrics serves', async () => {
  const dashboard = JSON.parse(readFileSync(new URL('../../docs/grafana-dashboard.json', import.meta.url), 'utf8')) as { panels: Panel[]; templating: { list: { definition: string }[] } };
  const queries = [...dashboard.panels.flatMap((p) => (p.targets ?? []).map((q) => q.expr)), ...dashboard.templating.list.map((v) => v.definition)];
  const names = new Set(queries.flatMap((q) => q.match(/\b(?:gantry|nodejs|process)_[a-z0-9_]+/g) ?? []).map((n) => n.replace(/_bucket$/, '')));
  expect(names.size).toBeGreaterThan(10);
  const served = await scrape(t.url, t.adminKey);
  for (const name of names) expect(Object.keys(served), name).toContain(name);
  for (const panel of dashboard.panels.filter((p) => p.type !== 'row')) expect(panel.targets?.length, panel.title).toBeGreaterThan(0);
});
