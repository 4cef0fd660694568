/**
 * The usage report (docs/api.md, "Usage"): job meters summed by the store, worker meters
 * clipped to the range and its days here, key ids named. Pure: the route reads, this adds up.
 *
 * Worker overhead (cold start, idle) is shown, not shared out: worker and GPU seconds belong
 * to the endpoint whose pool ran the worker, so rows grouped by key carry null there and the
 * total carries every second; a key's row has its jobs' execution seconds and cost.
 */
import { formatUsd, pixelsToMegapixels, usdNumber } from '../model/money.js';
import type { WorkerMeter } from '../model/records.js';
import type { UsageGroup, UsageSum } from '../store/store.js';

/** One UTC day in ms. */
const DAY_MS = 86_400_000;

/** One row of the report: its groups (those asked) and what was used and spent. */
export interface UsageRow {
  day?: string;
  key?: string | null;
  /** The key's name; null for jobs without a key (the console's session) or a deleted key. */
  keyName?: string | null;
  endpoint?: string;
  jobs: number;
  executionSeconds: number;
  /** Pool worker seconds, start to stop; null in rows grouped by key (see above). */
  workerSeconds: number | null;
  gpuSeconds: number | null;
  megapixels: number;
  /** USD as a JSON number that prints as the exact decimal. */
  cost: number;
  /** The same cost as a decimal string. */
  costUsd: string;
}

/** GET /admin/v1/usage. */
export interface UsageReport {
  from: string;
  to: string;
  /** The groups, comma-separated as asked (`endpoint`, `key,day`, ...). */
  groupBy: string;
  usage: UsageRow[];
  total: Omit<UsageRow, 'day' | 'key' | 'keyName' | 'endpoint'> & { workerSeconds: number; gpuSeconds: number };
}

/** What the report is made of. */
export interface UsageInputs {
  from: number;
  to: number;
  groupBy: readonly UsageGroup[];
  sums: readonly UsageSum[];
  workerMeters: readonly WorkerMeter[];
  keyNames: ReadonlyMap<string, string>;
}

interface Acc {
  day?: number;
  key?: string | null;
  endpoint?: string;
  jobs: number;
  executionMs: number;
  workerMs: number;
  gpuMs: number;
  pixels: number;
  costUnits: bigint;
}

const dayText = (day: number): string => new Date(day).toISOString().slice(0, 10);

/** Each worker meter's time in [from, to), cut at UTC midnights when `byDay`: [day start, ms] pairs. */
function workerSlices(m: WorkerMeter, from: number, to: number, byDay: boolean): [number, number][] {
  let at = Math.max(m.startedAt, from);
  const end = Math.min(m.endedAt, to);
  const slices: [number, number][] = [];
  while (at < end) {
    const day = Math.floor(at / DAY_MS) * DAY_MS;
    const until = byDay ? Math.min(end, day + DAY_MS) : end;
    slices.push([day, until - at]);
    at = until;
  }
  return slices;
}

/**
 * The report of a range.
 *
 * @example buildUsageReport({ from: 0, to: 86_400_000, groupBy: ['endpoint'], sums, workerMeters, keyNames }).total.workerSeconds
 */
export function buildUsageReport(input: UsageInputs): UsageReport {
  const { groupBy } = input;
  const rows = new Map<string, Acc>();
  const acc = (day: number | undefined, key: string | null | undefined, endpoint: string | undefined): Acc => {
    const id = JSON.stringify([day, key, endpoint]);
    let row = rows.get(id);
    if (!row) {
      row = { jobs: 0, executionMs: 0, workerMs: 0, gpuMs: 0, pixels: 0, costUnits: 0n };
      if (groupBy.includes('day')) row.day = day ?? 0;
      if (groupBy.includes('key')) row.key = key ?? null;
      if (groupBy.includes('endpoint')) row.endpoint = endpoint ?? '';
      rows.set(id, row);
    }
    return row;
  };
  const total: Acc = { jobs: 0, executionMs: 0, workerMs: 0, gpuMs: 0, pixels: 0, costUnits: 0n };
  for (const s of input.sums) {
    const row = acc(s.day, s.key, s.endpoint);
    for (const a of [row, total]) {
      a.jobs += s.jobs;
      a.executionMs += s.executionMs;
      a.pixels += s.pixels;
      a.costUnits += s.costUnits;
    }
  }
  const byKey = groupBy.includes('key');
  for (const m of input.workerMeters) {
    for (const [day, ms] of workerSlices(m, input.from, input.to, groupBy.includes('day'))) {
      total.workerMs += ms;
      total.gpuMs += ms * m.gpus;
      if (byKey) continue;
      const row = acc(groupBy.includes('day') ? day : undefined, undefined, groupBy.includes('endpoint') ? m.endpointId : undefined);
      row.workerMs += ms;
      row.gpuMs += ms * m.gpus;
    }
  }
  const usage = [...rows.values()]
    .sort((a, b) => (a.day ?? 0) - (b.day ?? 0) || (b.costUnits > a.costUnits ? 1 : b.costUnits < a.costUnits ? -1 : 0) || b.executionMs - a.executionMs || b.workerMs - a.workerMs)
    .map((a) => render(a, byKey, input.keyNames));
  const t = render(total, false, input.keyNames);
  return {
    from: new Date(input.from).toISOString(),
    to: new Date(input.to).toISOString(),
    groupBy: groupBy.join(','),
    usage,
    total: { jobs: t.jobs, executionSeconds: t.executionSeconds, workerSeconds: total.workerMs / 1000, gpuSeconds: total.gpuMs / 1000, megapixels: t.megapixels, cost: t.cost, costUsd: t.costUsd },
  };
}

function render(a: Acc, byKey: boolean, keyNames: ReadonlyMap<string, string>): UsageRow {
  const row: UsageRow = {} as UsageRow;
  if (a.day !== undefined) row.day = dayText(a.day);
  if (a.key !== undefined) {
    row.key = a.key;
    row.keyName = a.key === null ? null : (keyNames.get(a.key) ?? null);
  }
  if (a.endpoint !== undefined) row.endpoint = a.endpoint;
  row.jobs = a.jobs;
  row.executionSeconds = a.executionMs / 1000;
  row.workerSeconds = byKey ? null : a.workerMs / 1000;
  row.gpuSeconds = byKey ? null : a.gpuMs / 1000;
  row.megapixels = pixelsToMegapixels(a.pixels);
  row.cost = usdNumber(a.costUnits);
  row.costUsd = formatUsd(a.costUnits);
  return row;
}

/** A CSV cell: quoted when it holds a comma, quote or line break; text that a spreadsheet would run as a formula starts with '. */
function csvCell(value: unknown): string {
  if (value === null || value === undefined) return '';
  let text = String(value);
  if (typeof value === 'string' && /^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/**
 * The report's rows as CSV (RFC 4180): the grouped columns, then the measures; a last `total` line.
 *
 * @example usageCsv(report).split('\r\n')[0] === 'endpoint,jobs,executionSeconds,workerSeconds,gpuSeconds,megapixels,costUsd'
 */
export function usageCsv(report: UsageReport, groupBy: readonly UsageGroup[]): string {
  const groups: (keyof UsageRow)[] = [];
  if (groupBy.includes('day')) groups.push('day');
  if (groupBy.includes('key')) groups.push('key', 'keyName');
  if (groupBy.includes('endpoint')) groups.push('endpoint');
  const measures = ['jobs', 'executionSeconds', 'workerSeconds', 'gpuSeconds', 'megapixels', 'costUsd'] as const;
  const lines = [[...groups, ...measures].join(',')];
  for (const row of report.usage) lines.push([...groups.map((g) => csvCell(row[g])), ...measures.map((m) => csvCell(row[m]))].join(','));
  const first = groups.length > 0 ? ['total', ...groups.slice(1).map(() => '')] : [];
  lines.push([...first, ...measures.map((m) => csvCell(report.total[m]))].join(','));
  return `${lines.join('\r\n')}\r\n`;
}
