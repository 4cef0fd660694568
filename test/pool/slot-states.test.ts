// The named states of a pool worker slot (src/pool/slot.ts): the table of allowed moves, the
// checked moveTo, and a real pool (local processes, real keys on SQLite) walking its slots
// through them: starting → draining → gone, crashed → waiting → launching again, and a stop
// during a crash backoff going straight to gone.
import { mkdtempSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULTS } from '../../src/config/config.js';
import { createGateway, type Gateway } from '../../src/gateway.js';
import { createLocalProcessDriver } from '../../src/pool/local-process-driver.js';
import { moveTo, SLOT_MOVES, SlotMoveError, type Slot, type SlotState } from '../../src/pool/slot.js';
import { createWorkerPool, type WorkerPool } from '../../src/pool/worker-pool.js';
import { createSecretBox } from '../../src/security/secret-box.js';
import { createLocalNotifier } from '../../src/store/local-notifier.js';
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { createManualClock } from '../helpers/clock.js';
import { eventually } from '../helpers/gantry.js';

const STATES = Object.keys(SLOT_MOVES) as SlotState[];

function bareSlot(state: SlotState): Slot {
  return { id: 'w', state, movedBecause: '', spec: '', handle: null, launching: null, startedAt: null, readyAt: null, coldStart: null, resumedAt: null, held: 0, idleSince: null, restarts: 0, failures: 0, restartAt: null, reason: null, lastExit: null, selfUnhealthy: null, progress: null, pullFailed: false, key: null, log: null as never, finished: Promise.resolve() };
}

describe('slot states (pool/slot.ts)', () => {
  it('moveTo allows exactly the moves of SLOT_MOVES, keeping why', () => {
    for (const from of STATES) {
      for (const to of STATES) {
        const slot = bareSlot(from);
        if (SLOT_MOVES[from].includes(to)) {
          moveTo(slot, to, 'because');
          expect(slot).toMatchObject({ state: to, movedBecause: 'because' });
        } else {
          expect(() => moveTo(slot, to, 'because')).toThrow(SlotMoveError);
          expect(slot.state).toBe(from);
        }
      }
    }
    expect(() => moveTo(bareSlot('draining'), 'serving', 'a drained worker cannot serve again')).toThrow('pool worker w: no move from draining to serving (a drained worker cannot serve again)');
    // Every state but gone has a way out, and every state can be reached from new.
    const reached = new Set<SlotState>(['new']);
    for (let i = 0; i < STATES.length; i++) for (const s of [...reached]) for (const n of SLOT_MOVES[s]) reached.add(n);
    expect([...reached].sort()).toEqual([...STATES].sort());
    expect(STATES.filter((s) => SLOT_MOVES[s].length === 0)).toEqual(['gone']);
  });
});

describe('a pool walking its slots through the states (local processes)', () => {
  let dir: string;
  let app: Gateway;
  let pool: WorkerPool;
  const clock = createManualClock();
  let command = 'sleep 30';

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gantry-slots-'));
    const store = createSqliteStore({ file: join(dir, 'gantry.db') });
    await store.migrate();
    app = createGateway({
      config: { ...DEFAULTS, dataDir: dir },
      store,
      notifier: createLocalNotifier(),
      logger: pino({ level: 'silent' }),
      secrets: createSecretBox(randomBytes(32)),
      clock,
      baseUrl: () => 'http://127.0.0.1:9',
    });
    pool = createWorkerPool({
      endpointId: 'slots',
      driver: createLocalProcessDriver() as never,
      keys: app.keys,
      transitions: app.transitions,
      baseUrl: 'http://127.0.0.1:9',
      graceMs: 5_000,
      restartBackoffMs: 1_000,
      logLines: 100,
      pingIntervalMs: 1_000,
      logger: pino({ level: 'silent' }),
      now: clock.now,
      onChange: () => {},
    });
  });
  afterAll(async () => {
    await pool?.close('test over');
    rmSync(dir, { recursive: true, force: true });
  });

  const only = () => pool.workers()[0];

  it('starting → draining → gone; its key is revoked', async () => {
    pool.configure({ command });
    pool.start(1);
    const w = await eventually(async () => (only()?.pid ? only() : undefined), 10_000, 'the process to run');
    expect(w.state).toBe('initializing');
    expect((await app.keys.list()).some((k) => k.name.endsWith(w.id))).toBe(true);
    pool.stop(w.id, 'test stop');
    expect(only()?.state).toBe('draining');
    pool.stop(w.id, 'a second stop does nothing');
    await eventually(async () => (pool.workers().length === 0 ? true : undefined), 10_000, 'the worker to be gone');
    expect(pool.stoppedWorkers()[0]).toMatchObject({ id: w.id, state: 'stopped', reason: 'test stop' });
    await eventually(async () => ((await app.keys.list()).some((k) => k.name.endsWith(w.id)) ? undefined : true), 5_000, 'its key revoked');
  });

  it('crashed waits for its backoff, launches again on restartDue, and a stop in the backoff is gone at once', async () => {
    command = 'exit 3';
    pool.configure({ command });
    pool.start(1);
    const w = await eventually(async () => (only()?.restartAt ? only() : undefined), 10_000, 'the crash');
    expect(w).toMatchObject({ state: 'initializing', restarts: 1, lastExit: 'exited with code 3' });
    pool.restartDue(clock.now()); // not due yet: nothing
    expect(only()?.restarts).toBe(1);
    clock.advance(1_000);
    pool.restartDue(clock.now());
    const again = await eventually(async () => (only()?.restarts === 2 && only()?.restartAt ? only() : undefined), 10_000, 'the second crash');
    expect(again.state).toBe('unhealthy'); // two failed starts in a row
    pool.stop(again.id, 'stopped in its backoff');
    expect(pool.workers()).toEqual([]);
    expect(pool.stoppedWorkers()[0]).toMatchObject({ id: again.id, reason: 'stopped in its backoff' });
  });
});
