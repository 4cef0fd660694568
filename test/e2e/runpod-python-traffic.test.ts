// The claim "an unmodified runpod-python worker works against Gantry" rests on two things: the
// stand-in (fixtures/runpod_like_worker.py) passes runpod-python-protocol.test.ts, and the stand-in
// puts on the wire what the real runpod-python 1.12 does. This file checks the second against
// traffic recorded once from the real package (fixtures/runpod-python-traffic.json; how to
// record it again: docs/testing.md, "runpod-python's traffic").
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGantry } from '../helpers/gantry.js';
import { recordScenarios, SCENARIOS, type RequestShape, type Scenario } from './runpod-traffic.js';

const FIXTURE = fileURLToPath(new URL('./fixtures/runpod-python-traffic.json', import.meta.url));
const STAND_IN = fileURLToPath(new URL('./fixtures/runpod_like_worker.py', import.meta.url));
const REAL = fileURLToPath(new URL('./fixtures/runpod_real_worker.py', import.meta.url));
/** A python that imports the real runpod 1.12 (e.g. with PYTHONPATH set): records the fixture again. */
const RECORD_WITH = process.env.GANTRY_RECORD_RUNPOD_PYTHON;

interface Fixture {
  recorded: { runpodPython: string; python: string; date: string; how: string };
  scenarios: Record<string, RequestShape[]>;
}

let gantry: Awaited<ReturnType<typeof startTestGantry>>;
let runKey: string;

/** Order of distinct requests depends on timing (a ping before or after a take): compare as sets. */
const asSet = (shapes: RequestShape[] = []): string[] => shapes.map((s) => JSON.stringify(s)).sort();

describe('runpod-python 1.12 traffic', { timeout: 300_000 }, () => {
  beforeAll(async () => {
    gantry = await startTestGantry();
    runKey = await gantry.createKey(['run']);
  });
  afterAll(async () => {
    await gantry?.close();
  });

  it.runIf(RECORD_WITH)('records what the real runpod-python worker sends', async () => {
    const scenarios = await recordScenarios(gantry, runKey, {
      command: RECORD_WITH!,
      args: () => ['-u', REAL],
      env: (s: Scenario) => ({
        WORKER_HANDLER: s.handler,
        WORKER_CONCURRENCY: String(s.concurrency ?? 1),
        WORKER_AGGREGATE: s.aggregate ? '1' : '0',
      }),
    });
    const fixture: Fixture = {
      recorded: {
        runpodPython: process.env.GANTRY_RECORD_RUNPOD_VERSION ?? '1.12.0',
        python: RECORD_WITH!,
        date: new Date().toISOString().slice(0, 10),
        how: 'GANTRY_RECORD_RUNPOD_PYTHON=<python> npx vitest run test/e2e/runpod-python-traffic.test.ts (docs/testing.md)',
      },
      scenarios,
    };
    writeFileSync(FIXTURE, `${JSON.stringify(fixture, null, 2)}\n`);
  });

  it('the stand-in sends what the recorded runpod-python 1.12 sent, scenario by scenario', async () => {
    const fixture = JSON.parse(readFileSync(FIXTURE, 'utf8')) as Fixture;
    expect(Object.keys(fixture.scenarios).sort()).toEqual(SCENARIOS.map((s) => s.name).sort());
    const standIn = await recordScenarios(gantry, runKey, {
      command: 'python3',
      args: (s: Scenario) => ['-u', STAND_IN, '--handler', s.handler, '--concurrency', String(s.concurrency ?? 1), ...(s.aggregate ? ['--aggregate'] : [])],
      env: () => ({}),
    });
    for (const s of SCENARIOS) {
      const want = asSet(fixture.scenarios[s.name]);
      const got = asSet(standIn[s.name]);
      const differences = { 'sent by runpod-python only': want.filter((x) => !got.includes(x)), 'sent by the stand-in only': got.filter((x) => !want.includes(x)) };
      expect.soft(differences, s.name).toEqual({ 'sent by runpod-python only': [], 'sent by the stand-in only': [] });
    }
  });
});
