// Gantry used from another project, as the README tells it: `npm pack` makes the tarball, a
// scratch project installs it from the file, then a script of that project runs a worker
// (gantry/worker) and a client (gantry/client) against a real gateway, and TypeScript checks
// a file of that project against the shipped type declarations.
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGantry, type TestGantry } from '../helpers/gantry.js';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

let t: TestGantry;
let dir: string;
let tarball: string;
let packed: string[];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'gantry-scratch-'));
  // dist/ is built by `npm test` (pretest); --ignore-scripts keeps npm pack from building it
  // again under the feet of the other test files that run it.
  const { stdout } = await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', dir], { cwd: ROOT });
  const [info] = JSON.parse(stdout) as { filename: string; files: { path: string }[] }[];
  tarball = join(dir, info!.filename);
  packed = info!.files.map((f) => f.path);
  const project = join(dir, 'project');
  mkdirSync(project);
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'scratch', private: true, type: 'module' }));
  // The client and worker SDK are plain JavaScript: the gateway's native modules need not build here.
  await run('npm', ['install', '--ignore-scripts', '--no-audit', '--no-fund', '--prefer-offline', tarball], { cwd: project });
  t = await startTestGantry();
}, 300_000);

afterAll(async () => {
  await t?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('the npm pack tarball', () => {
  it('ships the built package, its declarations and the license, not the sources or tests', () => {
    for (const file of ['LICENSE', 'README.md', 'package.json', 'dist/src/sdk/client.js', 'dist/src/sdk/client.d.ts', 'dist/src/sdk/worker.js', 'dist/src/sdk/worker.d.ts', 'dist/src/cli/main.js']) {
      expect(packed, file).toContain(file);
    }
    expect(packed.filter((f) => f.startsWith('test/') || f.startsWith('src/') || f.endsWith('.map'))).toEqual([]);
    expect(readFileSync(join(ROOT, 'LICENSE'), 'utf8')).toMatch(/Apache License\s+Version 2\.0, January 2004/);
  });

  it('a scratch project runs a worker and a client against a real gateway', async () => {
    const endpoint = 'scratch-echo';
    await t.createEndpoint(endpoint);
    const runKey = await t.createKey(['run']);
    const workerKey = await t.createKey(['worker']);
    const project = join(dir, 'project');
    writeFileSync(
      join(project, 'main.mjs'),
      `import { createClient, GantryApiError } from 'gantry/client';
import * as root from 'gantry';
import { startWorker } from 'gantry/worker';
const { GANTRY_URL: url, RUN_KEY, WORKER_KEY, ENDPOINT: endpointId } = process.env;
const worker = startWorker({ url, endpointId, apiKey: WORKER_KEY, handler: async (job) => ({ doubled: job.input.n * 2 }), logger: { info() {}, warn() {}, error() {}, debug() {} } });
const client = createClient({ url, apiKey: RUN_KEY });
const job = await client.runSync(endpointId, { input: { n: 21 } }, { timeoutMs: 20000 });
const health = await client.health(endpointId);
const refused = await client.run(endpointId, { input: 'not an object' }).catch((err) => err);
await worker.stop();
console.log(JSON.stringify({ status: job.status, output: job.output, completed: health.jobs.completed, refused: refused instanceof GantryApiError ? refused.field : null, rootIsClient: root.createClient === createClient }));
`,
    );
    const { stdout } = await run(process.execPath, ['main.mjs'], {
      cwd: project,
      env: { ...process.env, GANTRY_URL: t.url, RUN_KEY: runKey, WORKER_KEY: workerKey, ENDPOINT: endpoint },
    });
    expect(JSON.parse(stdout.trim().split('\n').at(-1)!)).toEqual({ status: 'COMPLETED', output: { doubled: 42 }, completed: 1, refused: 'input', rootIsClient: true });
  }, 120_000);

  it("TypeScript checks the project's code against the shipped declarations", async () => {
    const project = join(dir, 'project');
    writeFileSync(
      join(project, 'check.ts'),
      `import { createClient, type Job } from 'gantry/client';
import { startWorker, type Handler } from 'gantry/worker';
import { createAdminClient } from 'gantry/admin';
const client = createClient({ url: 'http://localhost:8080', apiKey: 'k' });
export async function sum(): Promise<number> {
  const job: Job<{ total: number }> = await client.runSync<{ total: number }>('ep', { input: { a: 1 } });
  for await (const chunk of client.stream<string>('ep', job.id)) console.log(chunk.toUpperCase());
  return job.output?.total ?? 0;
}
const handler: Handler<{ a: number }> = async (job) => job.input.a + 1;
startWorker({ handler });
createAdminClient({ url: 'http://localhost:8080', adminKey: 'k' });
// @ts-expect-error: run needs a request with an input
void client.run('ep', {});
`,
    );
    writeFileSync(
      join(project, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', target: 'ES2022', strict: true, noEmit: true, types: ['node'], typeRoots: [join(ROOT, 'node_modules', '@types')] }, files: ['check.ts'] }),
    );
    const result = await run(process.execPath, [TSC, '-p', 'tsconfig.json'], { cwd: project }).catch((err: { stdout: string }) => ({ stdout: err.stdout, failed: true }));
    expect(result).toEqual({ stdout: '', stderr: '' });
    // tsc loads its whole library: on a busy machine this takes a while.
  }, 180_000);
});
