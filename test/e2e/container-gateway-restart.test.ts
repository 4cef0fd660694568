// A gateway killed with -9 leaves its worker containers running; the next start of the same
// installation finds them by label and stops them — and never a container it did not start.
// The gateway runs as a real `gantry serve` process (dist/, built by `npm test`).
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dockerInstance } from '../../src/config/docker-config.js';
import { containersOf, enginesFor, findTestEngines, type TestEngine } from '../fixtures/docker/test-engines.js';
import { ensureWorkerImage } from '../fixtures/docker/test-images.js';
import { eventually } from '../helpers/gantry.js';

const engines = await findTestEngines();
const CLI = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));

describe.skipIf(!enginesFor(engines, 1))('gateway killed with -9, then started again', () => {
  const engine = engines[0] as TestEngine;
  const dataDir = mkdtempSync(join(tmpdir(), 'gantry-restart-'));
  const adminKey = `test-admin-${randomBytes(8).toString('hex')}`;
  // The label of this installation's containers, derived as the gateway does (no GANTRY_DOCKER_INSTANCE).
  const instance = dockerInstance({}, dataDir);
  const foreign: string[] = [];
  let image: string;

  /** Starts `gantry serve` on a free port; resolves with its URL once it listens. */
  function serve(): Promise<{ child: ChildProcess; url: string }> {
    const child = spawn(process.execPath, [CLI, 'serve'], {
      env: {
        ...process.env,
        PORT: '0',
        GANTRY_HOST: '0.0.0.0',
        GANTRY_DATA_DIR: dataDir,
        GANTRY_ADMIN_KEY: adminKey,
        GANTRY_LOG_LEVEL: 'info',
        GANTRY_IMAGE_WORKERS: 'off',
        GANTRY_RATE_LIMITS: 'off',
        GANTRY_AUTOSCALER_INTERVAL_MS: '100',
        GANTRY_WORKER_STOP_GRACE_MS: '3000',
        GANTRY_DOCKER_HOSTS: JSON.stringify([{ name: 'a', url: engine.url }]),
        GANTRY_DOCKER_INSTANCE: '',
        DATABASE_URL: '',
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    return new Promise((resolve, reject) => {
      let out = '';
      child.stdout!.setEncoding('utf8').on('data', (text: string) => {
        out += text;
        const m = /"url":"(http:[^"]+)".*"msg":"gantry listening"/.exec(out);
        if (m?.[1]) resolve({ child, url: m[1] });
      });
      child.once('exit', (code) => reject(new Error(`gantry serve exited with ${code}: ${out}`)));
    });
  }

  async function api(url: string, method: string, path: string, body?: unknown): Promise<Record<string, unknown>> {
    const res = await fetch(`${url}${path}`, { method, headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' }, ...(body ? { body: JSON.stringify(body) } : {}) });
    const json = (await res.json()) as Record<string, unknown>;
    if (res.status !== 200) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  }
  const idle = async (url: string): Promise<number> => ((await api(url, 'GET', '/v2/left/health')).workers as { idle: number }).idle;

  beforeAll(async () => {
    image = await ensureWorkerImage(engine);
    // Containers Gantry did not start: one with no labels, one of another installation.
    for (const labels of [[], ['--label', 'io.gantry.instance=someone-else', '--label', 'io.gantry.endpoint=left']]) {
      foreign.push((await engine.cli('run', '-d', ...labels, image, 'python3', '-c', 'import time; time.sleep(600)')).trim());
    }
  }, 300_000);

  afterAll(async () => {
    for (const id of foreign) await engine.api.call('DELETE', `/containers/${id}?force=1`).catch(() => undefined);
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('stops the containers the killed gateway left, by their label, and only those', async () => {
    const first = await serve();
    await api(first.url, 'POST', '/admin/v1/endpoints', { id: 'left', workersMin: 2, idleTimeout: 60, worker: { image } });
    await eventually(async () => ((await idle(first.url)) === 2 ? true : undefined), 60_000, 'two idle containers');
    const left = (await containersOf(engine, instance)).map((c) => c.Id);
    expect(left).toHaveLength(2);

    first.child.kill('SIGKILL');
    await new Promise((r) => first.child.once('exit', r));
    // Nobody stopped them: they run on, unsupervised.
    expect((await containersOf(engine, instance)).filter((c) => c.State === 'running').map((c) => c.Id).sort()).toEqual([...left].sort());

    const second = await serve();
    try {
      const fresh = await eventually(async () => {
        const now = await containersOf(engine, instance);
        return now.length === 2 && now.every((c) => !left.includes(c.Id) && c.State === 'running') ? now : undefined;
      }, 60_000, 'the leftovers gone and two new containers');
      expect(fresh).toHaveLength(2);
      await eventually(async () => ((await idle(second.url)) === 2 ? true : undefined), 60_000, 'two idle new workers');
      // Containers Gantry did not start are untouched.
      for (const id of foreign) expect(((await engine.api.call('GET', `/containers/${id}/json`)) as { State: { Running: boolean } }).State.Running).toBe(true);
    } finally {
      second.child.kill('SIGTERM');
      await new Promise((r) => second.child.once('exit', r));
    }
    // A gateway stopped normally drains and removes its containers.
    expect(await containersOf(engine, instance)).toEqual([]);
  }, 180_000);
});
