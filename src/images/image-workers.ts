import { spawn, type ChildProcess } from 'node:child_process';
import { createHmac, randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { App } from '../app.js';
import { createApiKey } from '../http/admin-routes.js';
import { sha256Hex } from '../jobs/secrets.js';
import type { ImageModelKind } from './pricing.js';
import { ensureTinyModel } from './tiny-models.js';
import { runpodWorkerEnv } from '../jobs/worker-env.js';
import { startFileSweeper } from './file-sweeper.js';

/**
 * Runs one image worker process per public endpoint (src/images/image-worker.ts), restarted
 * with a growing delay when it dies. A plain supervisor on purpose: the general worker pool
 * can take these over later.
 */
export interface ImageWorkers {
  /** SIGTERM to every worker (they finish their job first), SIGKILL after `graceMs`. Idempotent. */
  stop(graceMs?: number): Promise<void>;
  /** Worker processes currently running (pids). */
  pids(): number[];
}

export interface ImageWorkersOptions {
  app: App;
  /** Base URL the workers use to reach this gateway. */
  gatewayUrl: string;
  /** Base URL of image links handed to clients (GANTRY_PUBLIC_URL, else gatewayUrl). */
  publicUrl: string;
  /** The gateway's secret key: the workers' API key and the file-URL key are derived from it. */
  secretKey: Buffer;
  fileSigningKey: Buffer;
}

const MAX_RESTART_DELAY_MS = 30_000;

/** The compiled worker entry: beside this module in dist/, or dist/src/images/ when running from src/ (tests). */
function workerScript(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const beside = join(here, 'image-worker.js');
  if (existsSync(beside)) return beside;
  const compiled = join(here, '..', '..', 'dist', 'src', 'images', 'image-worker.js');
  if (existsSync(compiled)) return compiled;
  throw new Error(`image worker script not found (looked for ${beside} and ${compiled}): run npm run build`);
}

/** A worker key for the image workers, derived from the secret key so restarts reuse it. */
async function ensureWorkerKey(app: App, secretKey: Buffer, endpoints: string[]): Promise<string> {
  const key = `gk_iw_${createHmac('sha256', secretKey).update(`image-workers:${endpoints.join(',')}`).digest('base64url')}`;
  if (!(await app.store.getKeyByHash(sha256Hex(key)))) {
    await createApiKey(app, { name: 'image workers (built in)', scopes: ['worker'], endpoints }, key);
  }
  return key;
}

/**
 * Builds the tiny models where no real model folder is configured, then starts the workers.
 *
 * @example const workers = await startImageWorkers({ app, gatewayUrl, publicUrl, secretKey, fileSigningKey }); await workers.stop();
 */
export async function startImageWorkers(options: ImageWorkersOptions): Promise<ImageWorkers> {
  const { app } = options;
  const { images, dataDir, logLevel } = app.config;
  const script = workerScript();
  const endpoints: [string, ImageModelKind, string | null][] = [
    [images.qualityId, 'quality', images.qualityModel],
    [images.fastId, 'fast', images.fastModel],
  ];
  const apiKey = await ensureWorkerKey(app, options.secretKey, endpoints.map(([id]) => id));
  const running = new Map<string, ChildProcess>();
  let stopping = false;

  const envFor = (endpointId: string, kind: ImageModelKind, modelDir: string): NodeJS.ProcessEnv => {
    const workerId = `${endpointId}-${randomUUID().slice(0, 8)}`;
    const s3 = images.s3;
    return {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      LOG_LEVEL: logLevel,
      ...runpodWorkerEnv({ gatewayUrl: options.gatewayUrl, endpointId, workerId, apiKey, pingIntervalMs: 5_000 }),
      GANTRY_IMAGE_KIND: kind,
      GANTRY_IMAGE_MODEL_DIR: modelDir,
      GANTRY_IMAGE_PROVIDER: images.provider,
      GANTRY_IMAGE_THREADS: String(images.threads),
      GANTRY_IMAGE_URL_TTL_S: String(images.urlTtlSeconds),
      GANTRY_FILES_DIR: join(dataDir, 'files'),
      GANTRY_FILES_BASE_URL: options.publicUrl,
      GANTRY_FILES_SIGNING_KEY: options.fileSigningKey.toString('base64'),
      ...(s3
        ? { GANTRY_S3_ENDPOINT: s3.endpoint, GANTRY_S3_BUCKET: s3.bucket, GANTRY_S3_ACCESS_KEY_ID: s3.accessKeyId, GANTRY_S3_SECRET_ACCESS_KEY: s3.secretAccessKey, GANTRY_S3_REGION: s3.region }
        : {}),
    };
  };

  const launch = (endpointId: string, kind: ImageModelKind, modelDir: string, failures: number): void => {
    if (stopping) return;
    const startedAt = Date.now();
    const child = spawn(process.execPath, [script], { env: envFor(endpointId, kind, modelDir), stdio: ['ignore', 'inherit', 'inherit'] });
    running.set(endpointId, child);
    app.logger.info({ endpointId, pid: child.pid, modelDir }, 'image worker started');
    child.once('exit', (code, signal) => {
      if (running.get(endpointId) === child) running.delete(endpointId);
      if (stopping) return;
      // A worker that ran a while before dying restarts at once; a crash loop backs off.
      const next = Date.now() - startedAt > 60_000 ? 0 : failures + 1;
      const delay = Math.min(MAX_RESTART_DELAY_MS, next === 0 ? 0 : 500 * 2 ** (next - 1));
      app.logger.error({ endpointId, code, signal, restartInMs: delay }, 'image worker exited; restarting');
      setTimeout(() => launch(endpointId, kind, modelDir, next), delay).unref();
    });
  };

  for (const [endpointId, kind, configured] of endpoints) {
    let modelDir = configured;
    if (modelDir === null) {
      modelDir = join(dataDir, 'models', endpointId);
      if (ensureTinyModel(modelDir, kind)) {
        app.logger.warn({ endpointId, modelDir }, 'built the tiny demo model: its images are abstract; set GANTRY_IMAGE_%s_MODEL to a real model folder (docs/models.md)'.replace('%s', kind.toUpperCase()));
      }
    }
    launch(endpointId, kind, modelDir, 0);
  }

  // Local images outlive their signed URLs otherwise; a bucket uses its own lifecycle rules.
  const stopSweeper = images.s3
    ? () => {}
    : startFileSweeper(join(dataDir, 'files'), images.urlTtlSeconds * 1000, (deleted) => app.logger.info({ deleted }, 'deleted images whose links expired'));

  let stopped: Promise<void> | undefined;
  return {
    pids: () => [...running.values()].map((c) => c.pid).filter((p): p is number => p !== undefined),
    stop(graceMs = 10_000) {
      stopping = true;
      stopSweeper();
      stopped ??= Promise.all(
        [...running.values()].map(
          (child) =>
            new Promise<void>((resolve) => {
              if (child.exitCode !== null || child.signalCode !== null) return resolve();
              const kill = setTimeout(() => child.kill('SIGKILL'), graceMs);
              child.once('exit', () => {
                clearTimeout(kill);
                resolve();
              });
              child.kill('SIGTERM');
            }),
        ),
      ).then(() => undefined);
      return stopped;
    },
  };
}
