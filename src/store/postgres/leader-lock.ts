import pg from 'pg';
import type { Logger } from 'pino';
import { createLeaderFlag } from '../leader-flag.js';
import type { LeaderLock } from '../store.js';
import { lockKeySql, type PgConnection } from './connection.js';

/**
 * The leader lock of gateways sharing PostgreSQL: a session advisory lock on a connection of
 * its own, tried every `retryMs`; the holder checks its connection as often, and a gateway that
 * dies loses the lock with its session, so another takes over within about `retryMs`.
 */
export interface PgLeaderLockOptions {
  connection: PgConnection;
  logger: Logger;
  /** How often a follower tries the lock and the leader checks its connection (default 2 s). */
  retryMs?: number;
}

/**
 * The leader lock of one gateway on a shared PostgreSQL database (see PgLeaderLockOptions):
 * start tries the lock at once and then every `retryMs`; stop ends the lock's session, which
 * frees the lock for another gateway.
 *
 * @example const lock = createPgLeaderLock({ connection, logger }); lock.onChange((on) => ...); lock.start();
 */
export function createPgLeaderLock(options: PgLeaderLockOptions): LeaderLock {
  const { logger } = options;
  const retryMs = options.retryMs ?? 2_000;
  const flag = createLeaderFlag((value) =>
    logger.info({ leader: value }, value ? 'this gateway is the leader: running the singletons' : 'this gateway is no longer the leader'),
  );
  const session = createLockSession(options.connection, retryMs, (err) => drop(err));
  let started = false;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let tick: Promise<void> | undefined;

  function drop(err: unknown): void {
    void session.detach()?.end().catch(() => undefined);
    if (flag.isLeader()) logger.warn({ err }, 'leader lock connection lost');
    flag.set(false);
  }

  function schedule(delay: number): void {
    timer = setTimeout(() => {
      tick = session
        .hold(flag.isLeader())
        .then((held) => {
          if (held && !stopped) flag.set(true);
        })
        .catch((err: unknown) => drop(err))
        .finally(() => {
          tick = undefined;
          if (!stopped) schedule(retryMs);
        });
    }, delay);
    timer.unref();
  }

  return {
    isLeader: () => flag.isLeader(),
    onChange: (fn) => flag.onChange(fn),
    start() {
      if (started) return;
      started = true;
      schedule(0);
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      clearTimeout(timer);
      await tick;
      const client = session.detach();
      flag.set(false);
      // Ending the session releases the advisory lock at once.
      await client?.end().catch(() => undefined);
    },
  };
}

/** The dedicated connection whose session holds the advisory lock; `onError` when it breaks. */
function createLockSession(connection: PgConnection, retryMs: number, onError: (err: unknown) => void) {
  let client: pg.Client | undefined;
  return {
    /**
     * Connects when needed; then, when `leader`, checks the connection (still connected: the
     * lock is still ours), else tries the lock. Whether the lock is held; throws when the
     * connection fails.
     */
    async hold(leader: boolean): Promise<boolean> {
      if (!client) {
        const c = new pg.Client({ ...connection.clientConfig, query_timeout: Math.max(retryMs, 1_000), application_name: 'gantry-leader' });
        c.on('error', (err) => {
          if (client === c) onError(err);
        });
        client = c;
        await c.connect();
      }
      if (leader) {
        await client.query('SELECT 1');
        return true;
      }
      const rows = (await client.query<{ ok: boolean }>(`SELECT pg_try_advisory_lock(${lockKeySql('leader')}) AS ok`)).rows;
      return rows[0]?.ok === true;
    },
    /** Forgets the connection and hands it over to be ended (which frees the lock). */
    detach(): pg.Client | undefined {
      const c = client;
      client = undefined;
      return c;
    },
  };
}
