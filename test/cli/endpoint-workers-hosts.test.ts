// `gantry endpoints workers`: the table of Docker hosts under the workers', run as the built
// CLI against a real gateway whose one Docker host is a socket nothing listens on, so its
// health checks fail and it is marked down (no engine needed). The same table for a host that
// is up, from a real engine, is checked in test/e2e/container-workers.test.ts.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hostConfig } from '../fixtures/docker/test-engines.js';
import { eventually, startTestGantry, type TestGantry } from '../helpers/gantry.js';
import { printed, runCli } from './run-cli.js';

let t: TestGantry;
let dir: string;

const cli = (args: string[]) => runCli(args, { GANTRY_URL: t.url, GANTRY_ADMIN_KEY: t.adminKey });

async function listing(endpointId: string): Promise<{ workers: { id: string }[]; hosts: { name: string; state: string; error: string | null }[] }> {
  const res = await fetch(`${t.url}/admin/v1/endpoints/${endpointId}/workers`, { headers: { authorization: `Bearer ${t.adminKey}` } });
  expect(res.status).toBe(200);
  return (await res.json()) as never;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'gantry-cli-hosts-'));
  t = await startTestGantry({
    autoscalerIntervalMs: 50,
    workerRestartBackoffMs: 200,
    docker: { hosts: [hostConfig(`unix://${dir}/nobody.sock`, 'gone', 2)], defaultHost: false, pingIntervalMs: 100, downAfterMs: 300, instance: `test-cli-${process.pid}` },
  });
});

afterAll(async () => {
  await t?.close();
  rmSync(dir, { recursive: true, force: true });
  expect(printed.join('\n')).not.toContain(t.adminKey);
});

describe('gantry endpoints workers', () => {
  it('prints no hosts table while the gateway has not used its Docker hosts', async () => {
    await t.createEndpoint('quiet');
    expect((await listing('quiet')).hosts).toEqual([expect.objectContaining({ name: 'gone', state: 'unknown' })]);
    const out = await cli(['endpoints', 'workers', 'quiet']);
    expect(out).toMatchObject({ code: 0, stderr: '' });
    expect(out.stdout).toBe('no workers\n');
  });

  it('prints the Docker hosts under the workers: state, engine, GPUs in use of all, containers, why down; --json is the workers alone', async () => {
    await t.createEndpoint('gpu', { workersMin: 1, worker: { image: 'gantry-test/none:1', gpus: 1 } });
    // The first start begins the health checks; the socket never answers, so the host goes down.
    const host = await eventually(async () => (await listing('gpu')).hosts.find((h) => h.state === 'down'), 20_000, 'the host to be marked down');
    expect(host.error).toBeTruthy();

    const out = await cli(['endpoints', 'workers', 'gpu']);
    expect(out).toMatchObject({ code: 0, stderr: '' });
    const tables = out.stdout.trimEnd().split('\n\n');
    expect(tables).toHaveLength(2);
    const [workers, hosts] = tables as [string, string];
    expect(workers).toMatch(/^ID\s+STATE\s+MANAGED\s+PID\s+HOST\s+CONTAINER\s+JOBS\s+RESTARTS\s+STARTED\s+REASON\n/);
    expect(workers).toMatch(/\ngpu-\S+\s+(throttled|unhealthy)\s+pool\s/);
    const lines = hosts.split('\n');
    expect(lines[0]).toMatch(/^HOST\s+STATE\s+ENGINE\s+GPUS USED\/TOTAL\s+WORKERS\s+ERROR$/);
    expect(lines.slice(1)).toEqual([expect.stringMatching(/^gone\s+down\s+-\s+0\/2\s+0\s+\S/)]);
    // The error column is the host's last failed check, as the admin API has it.
    expect(lines[1]).toContain(host.error!.split('\n')[0]);

    const json = await cli(['endpoints', 'workers', 'gpu', '--json']);
    expect(json.code).toBe(0);
    const parsed = JSON.parse(json.stdout) as { id: string }[];
    expect(Array.isArray(parsed)).toBe(true);
    expect(parsed.map((w) => w.id)).toEqual((await listing('gpu')).workers.map((w) => w.id));
  });
});
