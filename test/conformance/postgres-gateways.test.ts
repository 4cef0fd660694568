import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { GantryEvent } from '../../src/model/events.js';
import { openPostgres } from '../../src/store/postgres/connection.js';
import { createPgLeaderLock } from '../../src/store/postgres/leader-lock.js';
import { coalesce, MAX_PAYLOAD, pack, unpack } from '../../src/store/postgres/notify-wire.js';
import { openPostgresStore } from '../../src/store/postgres/postgres-store.js';
import type { LeaderLock, OpenedStore } from '../../src/store/store.js';
import { createTestSchema, type TestSchema } from '../helpers/postgres.js';

const logger = pino({ level: 'silent' });

/** Resolves with the first value `subscribe` reports that `accept` takes. */
function next<T>(subscribe: (fn: (value: T) => void) => () => void, accept: (value: T) => boolean = () => true): Promise<T> {
  return new Promise((resolve) => {
    const off = subscribe((value) => {
      if (!accept(value)) return;
      off();
      resolve(value);
    });
  });
}

describe('notify wire format', () => {
  it('coalesces a turn of events and reads them back', () => {
    const events: GantryEvent[] = [
      { type: 'jobs-available', endpointId: 'ep' },
      { type: 'jobs-available', endpointId: 'ep' },
      { type: 'stop-jobs', workerId: 'w1', jobIds: ['a'] },
      { type: 'stop-jobs', workerId: 'w1', jobIds: ['b', 'a'] },
      { type: 'job-updated', jobId: 'j' },
      { type: 'worker-recycle', workerId: 'w2', endpointId: 'ep' },
      { type: 'worker-stopping', workerId: 'w3', endpointId: 'ep' },
      { type: 'worker-stopping', workerId: 'w3', endpointId: 'ep' },
      { type: 'endpoint-changed', endpointId: 'ep' },
      { type: 'webhook-due' },
      { type: 'webhook-due' },
    ];
    const payloads = pack('me', coalesce(events));
    expect(payloads).toHaveLength(1);
    expect(unpack(payloads[0], 'me')).toEqual([]);
    expect(unpack(payloads[0], 'other')).toEqual([
      { type: 'jobs-available', endpointId: 'ep' },
      { type: 'job-updated', jobId: 'j' },
      { type: 'worker-recycle', workerId: 'w2', endpointId: 'ep' },
      { type: 'worker-stopping', workerId: 'w3', endpointId: 'ep' },
      { type: 'endpoint-changed', endpointId: 'ep' },
      { type: 'webhook-due' },
      { type: 'stop-jobs', workerId: 'w1', jobIds: ['a', 'b'] },
    ]);
    expect(unpack('not json', 'other')).toEqual([]);
  });

  it('splits what does not fit one NOTIFY payload', () => {
    const events: GantryEvent[] = Array.from({ length: 2000 }, (_, i) => ({ type: 'job-updated', jobId: `job-${i}` }));
    const payloads = pack('me', coalesce(events));
    expect(payloads.length).toBeGreaterThan(1);
    for (const payload of payloads) expect(payload.length).toBeLessThanOrEqual(MAX_PAYLOAD);
    expect(payloads.flatMap((payload) => unpack(payload, 'other'))).toEqual(events);
  });
});

describe('gateways sharing PostgreSQL', () => {
  let schema: TestSchema;
  const closers: (() => Promise<void>)[] = [];

  beforeEach(async () => {
    schema = await createTestSchema('gateways');
  });
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
    await schema.drop();
  });

  function gateway(): OpenedStore {
    const opened = openPostgresStore({ connectionString: schema.url, poolSize: 2 }, logger);
    closers.push(
      () => opened.store.close(),
      () => opened.notifier.close(),
    );
    return opened;
  }

  it('delivers an event on its own gateway at once and on the others through NOTIFY', async () => {
    const a = gateway();
    const b = gateway();
    await a.store.migrate();
    await Promise.all([a.notifier.start(), b.notifier.start()]);
    const onA: GantryEvent[] = [];
    a.notifier.subscribe((event) => onA.push(event));
    const onB = next<GantryEvent>((fn) => b.notifier.subscribe(fn));
    a.notifier.publish({ type: 'jobs-available', endpointId: 'ep' });
    expect(onA).toEqual([{ type: 'jobs-available', endpointId: 'ep' }]);
    expect(await onB).toEqual({ type: 'jobs-available', endpointId: 'ep' });
    // A's own notification came back to it through LISTEN too, and was not delivered twice.
    const marker = next<GantryEvent>((fn) => a.notifier.subscribe(fn), (event) => event.type === 'webhook-due');
    b.notifier.publish({ type: 'webhook-due' });
    await marker;
    expect(onA).toEqual([{ type: 'jobs-available', endpointId: 'ep' }, { type: 'webhook-due' }]);
  });

  it('elects one leader; another takes over when it stops', async () => {
    const lock = (): LeaderLock => {
      const connection = openPostgres({ connectionString: schema.url, poolSize: 2 });
      const created = createPgLeaderLock({ connection, logger, retryMs: 50 });
      closers.push(() => created.stop(), () => connection.close());
      return created;
    };
    const first = lock();
    const leads = next<boolean>((fn) => first.onChange(fn));
    first.start();
    expect(await leads).toBe(true);
    const second = lock();
    const takesOver = next<boolean>((fn) => second.onChange(fn));
    second.start();
    expect(second.isLeader()).toBe(false);
    const steppedDown = next<boolean>((fn) => first.onChange(fn));
    await first.stop();
    expect(await steppedDown).toBe(false);
    expect(await takesOver).toBe(true);
    expect(first.isLeader()).toBe(false);
    await first.stop(); // a second stop does nothing
  });
});
