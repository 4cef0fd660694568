import type { FeatureCharge, JobMeter, JobRecord } from '../model/records.js';
import type { JobStore } from '../store/store.js';
import { executionCostUnits } from '../model/money.js';
import type { EndpointService } from './endpoint-service.js';

/**
 * The meter of a job run that just ended (docs/api.md, "Usage"), or null for a job that never
 * ran (cancelled or expired in the queue: nothing was used, nothing is written).
 *
 * - execution: startedAt (the worker's take) to finishedAt (its result, the cancel or the timeout);
 * - cost: the endpoint's `pricePerSecond` × execution, for every run however it ended (the
 *   worker was held for it, as RunPod bills), plus the feature's charge of a COMPLETED job
 *   (the image endpoints' per-megapixel price: a failed generation stays free).
 */
export type MeterOf = (job: JobRecord) => Promise<JobMeter | null>;

/**
 * `store.getJobInput` is read only for a COMPLETED job of an endpoint whose feature charges
 * (its hook reads the input): a finished job comes without its input.
 *
 * @example const meterOf = createMeterOf({ endpoints, store }); await meterOf(finishedJob); // { jobId, executionMs: 1234, costUnits: 3_085_000n, ... }
 */
export function createMeterOf(deps: { endpoints: Pick<EndpointService, 'get' | 'hooksOf'>; store: Pick<JobStore, 'getJobInput'> }): MeterOf {
  const chargeOf = async (job: JobRecord): Promise<FeatureCharge | null> => {
    const hook = job.status === 'COMPLETED' ? deps.endpoints.hooksOf(job.endpointId)?.chargeOf : undefined;
    if (hook === undefined) return null;
    const inputJson = await deps.store.getJobInput(job.id);
    return inputJson === undefined ? null : hook({ ...job, inputJson });
  };
  return async (job) => {
    if (job.startedAt === null || job.finishedAt === null) return null;
    const executionMs = Math.max(0, job.finishedAt - job.startedAt);
    const charge = await chargeOf(job);
    const price = (await deps.endpoints.get(job.endpointId))?.priceUnitsPerSecond ?? null;
    const perSecond = price === null ? 0n : executionCostUnits(price, executionMs);
    return {
      jobId: job.id,
      run: job.retries,
      keyId: job.keyId,
      endpointId: job.endpointId,
      status: job.status,
      executionMs,
      pixels: charge?.pixels ?? 0,
      costUnits: (charge?.costUnits ?? 0n) + perSecond,
      workerId: job.workerId,
      createdAt: job.finishedAt,
    };
  };
}
