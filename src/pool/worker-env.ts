/**
 * The environment a RunPod worker is configured by (docs/worker-protocol.md): the webhook templates end
 * in `?` because runpod-python appends `&job_in_progress=…` and `&isStream=…`; `$ID` is the
 * worker id in the take URL and the job id in the others. Used for every worker Gantry starts
 * (worker pool, image workers) and by the tests.
 *
 * @example runpodWorkerEnv({ gatewayUrl: 'http://127.0.0.1:8080', endpointId: 'echo', workerId: 'w1', apiKey: 'gk_…', pingIntervalMs: 10_000 })
 */
export function runpodWorkerEnv(o: { gatewayUrl: string; endpointId: string; workerId: string; apiKey: string; pingIntervalMs: number }): Record<string, string> {
  const base = `${o.gatewayUrl}/v2/${o.endpointId}`;
  return {
    RUNPOD_WEBHOOK_GET_JOB: `${base}/job-take/$ID?`,
    RUNPOD_WEBHOOK_POST_OUTPUT: `${base}/job-done/$RUNPOD_POD_ID/$ID?`,
    RUNPOD_WEBHOOK_POST_STREAM: `${base}/job-stream/$RUNPOD_POD_ID/$ID?`,
    RUNPOD_WEBHOOK_PING: `${base}/ping/$RUNPOD_POD_ID`,
    RUNPOD_POD_ID: o.workerId,
    RUNPOD_AI_API_KEY: o.apiKey,
    RUNPOD_ENDPOINT_ID: o.endpointId,
    RUNPOD_PING_INTERVAL: String(o.pingIntervalMs),
    RUNPOD_SKIP_AUTO_SYSTEM_CHECKS: 'true',
  };
}

/**
 * What a worker process inherits from the gateway's environment: an allow-list (the search
 * path, home and user, locale and time zone, the temp folder, the dynamic library path, and
 * which GPUs the process may see: CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES,
 * CUDA_DEVICE_ORDER), never the rest — the gateway's environment holds its secrets
 * (GANTRY_S3_*, PGPASSWORD, AWS_*, DATABASE_URL, ...). Everything else a worker needs comes
 * from its endpoint's `worker.env` and the RUNPOD_* set (docs/security.md). The pool assigns no
 * GPUs to process workers: an operator who starts the gateway with CUDA_VISIBLE_DEVICES=2,3
 * restricts every process worker (image workers included) to those two (docs/models.md).
 */
const INHERITED = new Set([
  'PATH', 'HOME', 'USER', 'LOGNAME', 'SHELL', 'LANG', 'LANGUAGE', 'TZ', 'TMPDIR', 'LD_LIBRARY_PATH',
  'CUDA_VISIBLE_DEVICES', 'NVIDIA_VISIBLE_DEVICES', 'CUDA_DEVICE_ORDER',
]);

/**
 * The allow-listed part of `base` (INHERITED and LC_*).
 *
 * @example inheritedWorkerEnv({ PATH: '/bin', PGPASSWORD: 'x' }) // { PATH: '/bin' }
 */
export function inheritedWorkerEnv(base: NodeJS.ProcessEnv): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(base)) {
    if (value !== undefined && (INHERITED.has(key) || /^LC_[A-Z]+$/.test(key))) env[key] = value;
  }
  return env;
}
