import pg from 'pg';
import type { Logger } from 'pino';
import { lockKeySql } from '../store/postgres/connection.js';
import { isPostgresStore } from '../store/postgres/postgres-store.js';
import type { Store } from '../store/store.js';

/**
 * Which gateway runs the singletons (reaper, webhook sender, autoscaler): the one holding a
 * database lock. On PostgreSQL that is a session advisory lock on a connection of its own,
 * tried every `retryMs`; the holder checks its connection as often, and a gateway that dies
 * loses the lock with its session, so another takes over within about `retryMs`. On SQLite
 * (one gateway) this gateway is always the leader.
 */
export interface Leader {
  isLeader(): boolean;
  /** Called with true when this gateway becomes the leader and false when it stops being it. */
  onChange(listener: (leader: boolean) => void): () => void;
  start(): void;
  /** Gives the lock up (and tells the listeners). A second call does nothing. */
  stop(): Promise<void>;
}

export interface LeaderOptions {
  store: Store;
  logger: Logger;
  /** How often a follower tries the lock and the leader checks its connection (default 2 s). */
  retryMs?: number;
}

/** @example const leader = createLeader({ store, logger }); leader.onChange((on) => ...); leader.start(); */
export function createLeader(options: LeaderOptions): Leader {
  const { store, logger } = options;
  const retryMs = options.retryMs ?? 2_000;
  const listeners = new Set<(leader: boolean) => void>();
  let leader = false;
  let started = false;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let client: pg.Client | undefined;
  let tick: Promise<void> | undefined;

  function set(value: boolean): void {
    if (leader === value) return;
    leader = value;
    logger.info({ leader: value }, value ? 'this gateway is the leader: running the singletons' : 'this gateway is no longer the leader');
    for (const fn of listeners) fn(value);
  }

  function drop(err: unknown): void {
    const c = client;
    client = undefined;
    if (c) void c.end().catch(() => undefined);
    if (leader) logger.warn({ err }, 'leader lock connection lost');
    set(false);
  }

  async function attempt(): Promise<void> {
    if (!isPostgresStore(store)) return;
    if (!client) {
      const c = new pg.Client({ ...store.pg.clientConfig, query_timeout: Math.max(retryMs, 1_000), application_name: 'gantry-leader' });
      c.on('error', (err) => {
        if (client === c) drop(err);
      });
      client = c;
      await c.connect();
    }
    if (leader) {
      await client.query('SELECT 1'); // still connected, so the lock is still ours
      return;
    }
    const rows = (await client.query<{ ok: boolean }>(`SELECT pg_try_advisory_lock(${lockKeySql('leader')}) AS ok`)).rows;
    if (rows[0]?.ok === true && !stopped) set(true);
  }

  function schedule(delay: number): void {
    timer = setTimeout(() => {
      tick = attempt()
        .catch((err: unknown) => drop(err))
        .finally(() => {
          tick = undefined;
          if (!stopped) schedule(retryMs);
        });
    }, delay);
    timer.unref();
  }

  return {
    isLeader: () => leader,
    onChange(fn) {
      listeners.add(fn);
      return () => listeners.delete(fn);
    },
    start() {
      if (started) return;
      started = true;
      if (!isPostgresStore(store)) set(true);
      else schedule(0);
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      clearTimeout(timer);
      await tick;
      const c = client;
      client = undefined;
      set(false);
      // Ending the session releases the advisory lock at once.
      await c?.end().catch(() => undefined);
    },
  };
}
