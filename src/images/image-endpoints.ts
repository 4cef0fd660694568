import type { App } from '../app.js';
import type { EndpointRecord, JobRecord, UsageRecord } from '../store/store.js';
import { imageKindOf, type ImageConfig } from './image-config.js';
import { validateImageInput } from './image-input.js';
import { imageCostUnits } from './pricing.js';

/**
 * The two public endpoints as endpoint rows, so /run, /runsync, /status ... work through the
 * ordinary routes; input rules at submission; the usage record of a completed job.
 */

const EXECUTION_TIMEOUT_MS = 600_000;

/**
 * Creates the quality and fast endpoints when missing (an operator's later changes to their
 * settings are kept). No worker command: the gateway runs their workers itself.
 */
export async function ensureImageEndpoints(app: App): Promise<void> {
  const { images } = app.config;
  for (const [id, name] of [
    [images.qualityId, 'Text to image: quality model'],
    [images.fastId, 'Text to image: fast model'],
  ] as const) {
    if (await app.store.getEndpoint(id)) continue;
    const t = app.now();
    const endpoint: EndpointRecord = {
      id,
      name,
      workersMin: 1,
      workersMax: 1,
      idleTimeout: 5,
      executionTimeoutMs: EXECUTION_TIMEOUT_MS,
      scalerType: 'QUEUE_DELAY',
      scalerValue: 4,
      maxAttempts: 3,
      webhookSecret: null,
      workerJson: null,
      createdAt: t,
      updatedAt: t,
    };
    if (await app.store.createEndpoint(endpoint)) app.logger.info({ endpointId: id }, 'public image endpoint created');
  }
}

/**
 * Submission check of a public endpoint's input: a 400 `Invalid parameter: ...` before any job
 * exists. Other endpoints are not checked (their workers define their input).
 */
export function checkImageInput(config: ImageConfig, endpointId: string, inputJson: string): void {
  const kind = imageKindOf(config, endpointId);
  if (kind !== null) validateImageInput(kind, JSON.parse(inputJson));
}

/**
 * The usage record of a completed public-endpoint job: the size comes from the validated input
 * (what the worker generated and priced, so the output's `cost` equals the record); null for
 * other endpoints and for jobs that did not complete.
 */
export function imageUsage(config: ImageConfig, job: JobRecord): UsageRecord | null {
  const kind = imageKindOf(config, job.endpointId);
  if (kind === null || job.status !== 'COMPLETED') return null;
  const input = validateImageInput(kind, JSON.parse(job.inputJson));
  return {
    jobId: job.id,
    keyId: job.keyId,
    endpointId: job.endpointId,
    pixels: input.width * input.height,
    costUnits: imageCostUnits(kind, input.width, input.height),
    createdAt: job.finishedAt ?? job.createdAt,
  };
}
