// Restarts nobody notices (issue 26.3): two gateways on one PostgreSQL store behind
// deploy/nginx.conf, restarted one at a time (SIGTERM, wait for the exit, start again on the same
// port) while clients submit through the proxy and runpod-python 1.12 stand-ins take jobs and
// post results through it too. Every job a client was answered for ends COMPLETED (0 lost),
// each ran exactly once (0 run twice: counted from the stand-ins' `EVENT taken` lines), and no
// client saw an error other than a 503 it retried. The procedure is docs/deploy.md's.
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { buildWorkerEnv, eventually } from '../helpers/gantry.js';
import { newKey } from '../helpers/jobs.js';
import { hasNginx, httpsCall, startNginx, type Nginx } from '../helpers/nginx.js';
import { freePort } from '../helpers/ports.js';
import { createTestSchema, type TestSchema } from '../helpers/postgres.js';
import { spawnOwned } from '../helpers/processes.js';
import { startGateway, type ServeProcess } from '../helpers/serve-process.js';
import { join } from 'node:path';

const STAND_IN = fileURLToPath(new URL('../e2e/fixtures/runpod_like_worker.py', import.meta.url));
const ADMIN_KEY = 'rolling-restart-admin-key-0123456789';
const ENDPOINT = 'rolling';

let schema: TestSchema | undefined;
let proxy: Nginx | undefined;
const gateways: ServeProcess[] = [];
afterAll(async () => {
  await proxy?.stop();
  await Promise.all(gateways.map((g) => g.stop()));
  await schema?.drop();
});

describe.runIf(hasNginx || process.env.CI === 'true')('rolling restart behind nginx', () => {
  it('two gateways restarted one at a time: 0 jobs lost, 0 run twice, only retried 503s', async () => {
    schema = await createTestSchema('rolling');
    const ports = [await freePort(), await freePort()];
    const serve = async (port: number): Promise<ServeProcess> => {
      const gw = await startGateway({
        adminKey: ADMIN_KEY,
        env: {
          DATABASE_URL: schema!.url,
          PORT: String(port),
          GANTRY_TRUSTED_PROXIES: '127.0.0.1',
          GANTRY_JOB_TAKE_WAIT_MS: '2000',
          GANTRY_WORKER_LOST_MS: '10000',
          GANTRY_REAPER_INTERVAL_MS: '250',
        },
      });
      gateways.push(gw);
      return gw;
    };
    const running = [await serve(ports[0]!), await serve(ports[1]!)];
    proxy = await startNginx(ports.map((p) => `127.0.0.1:${p}`));
    await running[0]!.admin.createEndpoint({ id: ENDPOINT });
    const runKey = await newKey(running[0]!, ['run', 'read']);
    const workerKey = await newKey(running[0]!, ['worker']);

    // runpod-python stand-ins, through the proxy over TLS (trusting its certificate).
    const outputs: (() => string)[] = [];
    for (const n of [1, 2, 3]) {
      const proc = spawnOwned('python3', ['-u', STAND_IN, '--handler', 'sleep'], {
        env: { ...process.env, ...buildWorkerEnv(proxy.url, ENDPOINT, `py-${n}`, workerKey), SSL_CERT_FILE: join(proxy.dir, 'gantry.crt') },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      proc.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
      proc.stderr!.setEncoding('utf8').on('data', () => undefined);
      outputs.push(() => out);
    }

    // Clients through the proxy: a 503 is retried after its Retry-After; anything else but a 200 is an error.
    const acked: string[] = [];
    const errors: string[] = [];
    let retried503 = 0;
    let submitting = true;
    const submit = async (n: number): Promise<void> => {
      for (;;) {
        try {
          const r = await httpsCall(proxy!, 'POST', `/v2/${ENDPOINT}/run`, { headers: { authorization: `Bearer ${runKey}` }, body: JSON.stringify({ input: { seconds: 0.2, n } }) });
          if (r.status === 200) return void acked.push((JSON.parse(r.text) as { id: string }).id);
          if (r.status !== 503) return void errors.push(`${r.status} ${r.text.slice(0, 200)}`);
          retried503++;
          await new Promise((resolve) => setTimeout(resolve, Number(r.headers['retry-after'] ?? 1) * 1000));
        } catch (err) {
          return void errors.push(String(err));
        }
      }
    };
    const clients = Array.from({ length: 2 }, async (_, c) => {
      for (let i = 0; submitting; i++) {
        await submit(c * 100_000 + i);
        await new Promise((resolve) => setTimeout(resolve, 150));
      }
    });

    // Jobs flowing, then each gateway in turn: stopped (it drains), started again on its port.
    await eventually(async () => (acked.length >= 20 ? true : undefined), 60_000, '20 jobs submitted');
    for (const i of [0, 1]) {
      expect(await running[i]!.stop()).toBe(0);
      const before = acked.length;
      running[i] = await serve(ports[i]!);
      await eventually(async () => (acked.length >= before + 10 ? true : undefined), 60_000, `jobs submitted after gateway ${i} came back`);
    }
    submitting = false;
    await Promise.all(clients);

    expect(errors).toEqual([]);
    const client = running[0]!.client(runKey);
    const ended = await Promise.all(acked.map((id) => client.wait(ENDPOINT, id, { timeoutMs: 120_000 })));
    const notCompleted = ended.filter((j) => j.status !== 'COMPLETED').map((j) => `${j.id} ${j.status}`);
    expect(notCompleted).toEqual([]);
    const runs = new Map<string, number>();
    for (const out of outputs) for (const m of out().matchAll(/^EVENT taken (\S+)$/gm)) runs.set(m[1]!, (runs.get(m[1]!) ?? 0) + 1);
    const twice = [...runs].filter(([, n]) => n > 1);
    expect(twice).toEqual([]);
    expect(acked.every((id) => runs.get(id) === 1)).toBe(true);
    console.log(`rolling restart: ${acked.length} jobs, ${retried503} retried 503s, 0 lost, 0 run twice`);
  }, 400_000);
});
