import type { Registry } from 'prom-client';
import { counter } from './job-metrics.js';

/** What became of one webhook call: a 2xx, another answer, or none (network error, timeout). */
export type WebhookOutcome = 'delivered' | 'rejected' | 'unreachable';

const OUTCOMES: readonly WebhookOutcome[] = ['delivered', 'rejected', 'unreachable'];

/**
 * Counts webhook calls by outcome. It watches the sender's fetch (src/gateway.ts hands the
 * webhook sender {@link WebhookMetrics.wrapFetch}'s result), so every attempt, retries
 * included, is one count.
 */
export class WebhookMetrics {
  private readonly counts = [0, 0, 0];

  /** A fetch that counts the outcome of each call it makes through `inner`. */
  wrapFetch(inner: typeof fetch): typeof fetch {
    return async (input, init) => {
      let response: Response;
      try {
        response = await inner(input, init);
      } catch (err) {
        this.counts[2]! += 1;
        throw err;
      }
      this.counts[response.ok ? 0 : 1]! += 1;
      return response;
    };
  }

  /** Registers gantry_webhook_deliveries_total, filled at scrape time. */
  register(registry: Registry): void {
    counter(registry, 'gantry_webhook_deliveries_total', 'Webhook calls by outcome (each attempt counts).', ['outcome'], (set) => {
      for (const [i, outcome] of OUTCOMES.entries()) set({ outcome }, this.counts[i]!);
    });
  }
}
