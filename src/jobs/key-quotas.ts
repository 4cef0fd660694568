import { AppError } from '../model/errors.js';
import { formatUsd, usdNumber } from '../model/money.js';
import type { BudgetPeriod, KeyRecord } from '../model/records.js';
import type { KeyStore, UsageStore } from '../store/store.js';
import { TtlCache } from '../util/ttl-cache.js';

/** How long a key's limits are cached: a PATCH on another gateway shows within this. */
const LIMITS_MS = 5_000;
/** How long a key's spend in its period is cached: a key may overrun its budget by what it spends in this time (docs/api.md, "Budgets"). */
export const SPEND_MS = 1_000;
/** Keys whose limits and spend are remembered at most (each entry a few numbers). */
const KEYS_MAX = 10_000;
/** Retry-After of a maxConcurrentJobs refusal: a job usually ends within this. */
const CONCURRENT_RETRY_S = 1;

/** A key's budget and job cap; null fields are unset. */
export type KeyLimits = Pick<KeyRecord, 'name' | 'budgetUnits' | 'budgetPeriod' | 'maxConcurrentJobs'>;

/**
 * The start of the budget period holding `at` and the start of the next (UTC calendar day or month).
 *
 * @example budgetPeriodOf('day', Date.UTC(2026, 10, 27, 13)) // { start: Date.UTC(2026, 10, 27), end: Date.UTC(2026, 10, 28) }
 */
export function budgetPeriodOf(period: BudgetPeriod, at: number): { start: number; end: number } {
  const d = new Date(at);
  if (period === 'day') {
    const start = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate());
    return { start, end: start + 86_400_000 };
  }
  return { start: Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1), end: Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1) };
}

/** A key's spend against its budget in the current period (the admin API and console show it). */
export interface BudgetStatus {
  budgetUsd: string;
  budgetPeriod: BudgetPeriod;
  spentUsd: string;
  /** When the period ends and the spend starts again from 0 (ISO 8601, UTC). */
  resetsAt: string;
}

/**
 * Budgets and job caps per key (docs/api.md, "Budgets and quotas"), checked at every submit
 * (run, runsync, OpenAI) before a job exists: a key whose spend in its period reached its
 * budget gets 402 BUDGET_EXCEEDED; a key with maxConcurrentJobs queued or running jobs gets
 * 429 TOO_MANY_JOBS. A key without limits costs one cache lookup; spend is cached SPEND_MS.
 */
export interface KeyQuotas {
  /** Throws the refusal of a submit by `keyId` (null: the console's session, never limited); undefined when nothing needs awaiting. */
  admit(keyId: string | null): Promise<void> | undefined;
  /** The key's spend in its current budget period; null without a budget. */
  budgetStatus(key: KeyLimits & { id: string }): Promise<BudgetStatus | null>;
  /** Forgets a key's cached limits and spend (its limits changed here). */
  forget(keyId: string): void;
}

/** @example const quotas = createKeyQuotas({ store, now: Date.now }); await quotas.admit(principal.keyId); */
export function createKeyQuotas(deps: { store: Pick<KeyStore, 'getKey'> & Pick<UsageStore, 'keySpend' | 'countLiveJobs'>; now(): number }): KeyQuotas {
  return new Quotas(deps);
}

class Quotas implements KeyQuotas {
  private readonly limits = new TtlCache<string, KeyLimits | null>({ ttlMs: LIMITS_MS, maxEntries: KEYS_MAX });
  /** Spend by `${keyId} ${periodStart}`, so a rolled period never reads the last one's. */
  private readonly spend = new TtlCache<string, bigint>({ ttlMs: SPEND_MS, maxEntries: KEYS_MAX });

  constructor(private readonly deps: { store: Pick<KeyStore, 'getKey'> & Pick<UsageStore, 'keySpend' | 'countLiveJobs'>; now(): number }) {}

  admit(keyId: string | null): Promise<void> | undefined {
    if (keyId === null) return undefined;
    const hit = this.limits.get(keyId, this.deps.now());
    if (hit && (hit.value === null || (hit.value.budgetUnits === null && hit.value.maxConcurrentJobs === null))) return undefined;
    return this.check(keyId, hit?.value);
  }

  private async check(keyId: string, cached: KeyLimits | null | undefined): Promise<void> {
    const limits = cached === undefined ? await this.load(keyId) : cached;
    if (limits === null) return;
    if (limits.budgetUnits !== null && limits.budgetPeriod !== null) {
      const now = this.deps.now();
      const { start, end } = budgetPeriodOf(limits.budgetPeriod, now);
      const spent = await this.spent(keyId, start);
      if (spent >= BigInt(limits.budgetUnits)) {
        const budget = BigInt(limits.budgetUnits);
        throw new AppError(
          'BUDGET_EXCEEDED',
          `API key ${limits.name} spent ${formatUsd(spent)} USD of its budget of ${formatUsd(budget)} USD per ${limits.budgetPeriod}; it resets at ${new Date(end).toISOString()}`,
          { budgetUsd: usdNumber(budget), budgetPeriod: limits.budgetPeriod, spentUsd: usdNumber(spent), resetsAt: new Date(end).toISOString() },
        );
      }
    }
    if (limits.maxConcurrentJobs !== null) {
      const live = await this.deps.store.countLiveJobs(keyId);
      if (live >= limits.maxConcurrentJobs) {
        throw new AppError('TOO_MANY_JOBS', `API key ${limits.name} has ${live} jobs queued or running, its maxConcurrentJobs is ${limits.maxConcurrentJobs}`, { maxConcurrentJobs: limits.maxConcurrentJobs }, {
          'retry-after': String(CONCURRENT_RETRY_S),
        });
      }
    }
  }

  async budgetStatus(key: KeyLimits & { id: string }): Promise<BudgetStatus | null> {
    if (key.budgetUnits === null || key.budgetPeriod === null) return null;
    const { start, end } = budgetPeriodOf(key.budgetPeriod, this.deps.now());
    const spent = await this.spent(key.id, start);
    return { budgetUsd: formatUsd(BigInt(key.budgetUnits)), budgetPeriod: key.budgetPeriod, spentUsd: formatUsd(spent), resetsAt: new Date(end).toISOString() };
  }

  forget(keyId: string): void {
    this.limits.delete(keyId);
    for (const period of ['day', 'month'] as const) this.spend.delete(`${keyId} ${budgetPeriodOf(period, this.deps.now()).start}`);
  }

  private async load(keyId: string): Promise<KeyLimits | null> {
    const key = await this.deps.store.getKey(keyId);
    const limits = key ? { name: key.name, budgetUnits: key.budgetUnits, budgetPeriod: key.budgetPeriod, maxConcurrentJobs: key.maxConcurrentJobs } : null;
    this.limits.set(keyId, limits, this.deps.now());
    return limits;
  }

  private async spent(keyId: string, periodStart: number): Promise<bigint> {
    const id = `${keyId} ${periodStart}`;
    const hit = this.spend.get(id, this.deps.now());
    if (hit) return hit.value;
    const spent = await this.deps.store.keySpend({ keyId, from: periodStart });
    this.spend.set(id, spent, this.deps.now());
    return spent;
  }
}
