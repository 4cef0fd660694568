import { defineConfig } from 'vitest/config';

// docs/testing.md: how the suite is organised and how long it takes.
// The store-dependent HTTP and e2e suites run twice: on SQLite (the default backend) and on PostgreSQL.
const BOTH_STORES = [
  'test/http/client-routes.test.ts',
  'test/http/worker-routes.test.ts',
  'test/http/bad-input.test.ts',
  'test/http/admin-routes.test.ts',
  'test/http/webhook-signing.test.ts',
  'test/http/documented-limits.test.ts',
  'test/e2e/autoscaler.test.ts',
  'test/sdk/worker.test.ts',
  'test/e2e/gateway-restart.test.ts',
  'test/http/usage-meters.test.ts',
  'test/e2e/cold-start-restart.test.ts',
];

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two test files at a time: the e2e files start gateways, worker processes and containers
    // of their own, and this suite must hold on a 2-core machine.
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
    // One temp folder for the whole run, whose processes are all killed at its end (docs/testing.md,
    // "What the suite starts and stops"); one PostgreSQL server for the whole run (an embedded one
    // when none is configured).
    globalSetup: ['test/helpers/global-processes.ts', 'test/helpers/global-postgres.ts'],
    // Kills what a test file started and left running, after the file's own afterAll.
    setupFiles: ['test/helpers/setup-file.ts'],
    projects: [
      { extends: true, test: { name: 'main', include: ['test/**/*.test.ts'] } },
      { extends: true, test: { name: 'postgres', include: BOTH_STORES, env: { GANTRY_TEST_BACKEND: 'postgres' } } },
    ],
  },
});
