// A worker resumed from flashboot's warm pool: its first request after the resume writes its
// liveness row at once, past the one-write-a-second throttle (src/jobs/worker-service.ts), so
// the row tells the pool when it polled again (the end of its cold start). Real SQLite file,
// the gateway's own services, a clock the test moves.
import { mkdtempSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DEFAULTS } from '../../src/config/config.js';
import { createGateway, type Gateway } from '../../src/gateway.js';
import { parseEndpointSettings } from '../../src/jobs/endpoint-settings.js';
import { createSecretBox } from '../../src/security/secret-box.js';
import { createLocalNotifier } from '../../src/store/local-notifier.js';
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { Store } from '../../src/store/store.js';
import type { Notifier } from '../../src/model/events.js';

describe('the liveness row of a resumed worker', () => {
  let dir: string;
  let store: Store;
  let app: Gateway;
  let notifier: Notifier;
  let clock: number;
  const signal = new AbortController().signal;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gantry-resumed-'));
    clock = 1_800_000_000_000;
    store = createSqliteStore({ file: join(dir, 'gantry.db') });
    await store.migrate();
    notifier = createLocalNotifier();
    const secrets = createSecretBox(randomBytes(32));
    app = createGateway({
      config: { ...DEFAULTS, dataDir: dir, jobTakeWaitMs: 0 },
      store,
      notifier,
      logger: pino({ level: 'silent' }),
      secrets,
      clock: { now: () => clock, after: () => () => {} },
      baseUrl: () => 'http://127.0.0.1:0',
    });
    await store.createEndpoint(parseEndpointSettings({ id: 'ep' }, undefined, clock, secrets.seal));
  });

  afterEach(async () => {
    app.closeWaits();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const lastSeen = async (): Promise<number | undefined> => (await store.listWorkers('ep')).find((w) => w.id === 'w1')?.lastSeenAt;

  it('is written by the first take after the worker-resuming event, within the throttle period', async () => {
    const start = clock;
    await app.workers.take('ep', 'w1', 1, signal);
    expect(await lastSeen()).toBe(start);
    clock += 300;
    await app.workers.take('ep', 'w1', 1, signal);
    expect(await lastSeen()).toBe(start); // throttled: one write a second
    notifier.publish({ type: 'worker-resuming', workerId: 'w1', endpointId: 'ep' });
    clock += 300;
    await app.workers.take('ep', 'w1', 1, signal);
    expect(await lastSeen()).toBe(start + 600);
  });
});
