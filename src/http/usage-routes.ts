import { invalidParameter } from '../model/errors.js';
import { formatUsd, pixelsToMegapixels, usdNumber } from '../model/money.js';
import type { UsageStore } from '../store/store.js';
import { sendJson } from './respond.js';
import type { RouteCall } from './route-table.js';

/** `from` / `to` as epoch milliseconds or an ISO 8601 date. */
function parseTime(field: string, raw: string | null, fallback: number): number {
  if (raw === null || raw === '') return fallback;
  const value = /^\d+$/.test(raw) ? Number(raw) : Date.parse(raw);
  if (!Number.isSafeInteger(value)) throw invalidParameter(field, 'must be epoch milliseconds or an ISO 8601 date');
  return value;
}

/** What the usage route reads. */
export interface UsageRouteDeps {
  usage: Pick<UsageStore, 'sumUsage'>;
  now(): number;
}

/**
 * `GET /admin/v1/usage?from=&to=&groupBy=key|endpoint`: usage of the public endpoints summed
 * over [from, to) (default: everything until now), per key or per endpoint. Costs are exact
 * (`cost` a JSON number that prints as the exact decimal, `costUsd` the same as a string).
 */
export async function sendUsage(deps: UsageRouteDeps, { res, query }: RouteCall): Promise<void> {
  for (const key of query.keys()) {
    if (!['from', 'to', 'groupBy'].includes(key)) throw invalidParameter(key, 'is not a known parameter (expected from, to, groupBy)');
  }
  const groupBy = query.get('groupBy') ?? 'endpoint';
  if (groupBy !== 'key' && groupBy !== 'endpoint') throw invalidParameter('groupBy', 'must be key or endpoint');
  const from = parseTime('from', query.get('from'), 0);
  const to = parseTime('to', query.get('to'), deps.now() + 1);
  if (to < from) throw invalidParameter('to', 'must not be before from');
  const sums = await deps.usage.sumUsage({ from, to, groupBy });
  let units = 0n;
  let pixels = 0;
  let jobs = 0;
  const usage = sums.map((s) => {
    units += s.costUnits;
    pixels += s.pixels;
    jobs += s.jobs;
    return { [groupBy]: s.group, jobs: s.jobs, megapixels: pixelsToMegapixels(s.pixels), cost: usdNumber(s.costUnits), costUsd: formatUsd(s.costUnits) };
  });
  sendJson(res, 200, {
    from: new Date(from).toISOString(),
    to: new Date(to).toISOString(),
    groupBy,
    usage,
    total: { jobs, megapixels: pixelsToMegapixels(pixels), cost: usdNumber(units), costUsd: formatUsd(units) },
  });
}
