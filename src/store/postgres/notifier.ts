import { randomUUID } from 'node:crypto';
import pg from 'pg';
import type { Logger } from 'pino';
import type { PgConnection } from './connection.js';
import type { GantryEvent, Notifier } from '../../model/events.js';
import { coalesce, pack, unpack } from './notify-wire.js';

/** What the PostgreSQL notifier needs: the store's connection settings and where to log. */
export interface PgNotifierOptions {
  connection: PgConnection;
  logger: Logger;
  /** Delay before a broken LISTEN connection is reopened (default 1 s). */
  reconnectMs?: number;
}

/**
 * A Notifier for gateways sharing one PostgreSQL database: every event reaches this gateway's
 * listeners at once (as createLocalNotifier does) and the other gateways' through
 * LISTEN/NOTIFY. Events stay wake-ups only: the events of one event-loop turn — and of every
 * turn while a NOTIFY is in flight — are coalesced (one 'jobs-available' per endpoint, job ids
 * merged; notify-wire.ts) into one notification, so a gateway sends at most one NOTIFY at a
 * time. A lost notification only delays: take queues and job waiters re-read the store
 * periodically.
 *
 * The channel is per schema, so Gantry installs in different schemas of one database never
 * wake each other.
 *
 * @example const notifier = createPgNotifier({ connection, logger }); await notifier.start();
 */
export function createPgNotifier(options: PgNotifierOptions): Notifier {
  const { connection, logger } = options;
  const origin = randomUUID().slice(0, 8);
  const listeners = new Set<(event: GantryEvent) => void>();
  let name: Promise<string> | undefined;
  const channel = (): Promise<string> => (name ??= connection.schema().then((schema) => `gantry:${schema}`));
  let outgoing: GantryEvent[] = [];
  let scheduled = false;
  let sending: Promise<void> | undefined;
  let closed = false;

  const deliver = (event: GantryEvent): void => deliverTo(listeners, event, logger);
  const listener = createListener({ ...options, channel, onPayload: (payload) => unpack(payload, origin).forEach(deliver) });

  function flush(): void {
    scheduled = false;
    if (sending || closed || outgoing.length === 0) return;
    const events = outgoing;
    outgoing = [];
    sending = send(events).finally(() => {
      sending = undefined;
      if (outgoing.length > 0 && !scheduled) {
        scheduled = true;
        setImmediate(flush);
      }
    });
  }

  async function send(events: GantryEvent[]): Promise<void> {
    try {
      const payloads = pack(origin, coalesce(events));
      const calls = payloads.map((_, i) => `pg_notify($1, $${i + 2})`).join(', ');
      await connection.query(`SELECT ${calls}`, [await channel(), ...payloads]);
    } catch (err) {
      if (!closed) logger.warn({ err }, 'NOTIFY failed; other gateways will see the change at their next poll');
    }
  }

  return {
    publish(event) {
      deliver(event);
      if (closed) return;
      outgoing.push(event);
      if (!scheduled) {
        scheduled = true;
        setImmediate(flush);
      }
    },
    subscribe(fn) {
      listeners.add(fn);
      return () => listeners.delete(fn);
    },
    start: () => listener.start(),
    async close() {
      if (closed) return;
      if (scheduled || outgoing.length > 0) flush();
      await sending;
      closed = true;
      await listener.close();
    },
  };
}

/** Runs every listener on `event`; one that throws is logged and the others still run. */
function deliverTo(listeners: Set<(event: GantryEvent) => void>, event: GantryEvent, logger: Logger): void {
  for (const fn of listeners) {
    try {
      fn(event);
    } catch (err) {
      logger.error({ err, event: event.type }, 'event listener failed');
    }
  }
}

interface ListenerOptions extends PgNotifierOptions {
  channel(): Promise<string>;
  onPayload(payload: string | undefined): void;
}

/** The LISTEN connection: its own client, reopened after `reconnectMs` whenever it breaks, until closed. */
function createListener(options: ListenerOptions): { start(): Promise<void>; close(): Promise<void> } {
  const { connection, logger } = options;
  let listener: pg.Client | undefined;
  let reconnect: NodeJS.Timeout | undefined;
  let closed = false;

  async function listen(): Promise<void> {
    const name = await options.channel();
    const client = new pg.Client(connection.clientConfig);
    const broken = (err?: unknown): void => {
      if (listener !== client) return;
      listener = undefined;
      client.removeAllListeners('notification');
      void client.end().catch(() => undefined);
      if (closed) return;
      logger.warn({ err }, 'LISTEN connection lost; reconnecting (polling covers the gap)');
      scheduleReconnect();
    };
    client.on('error', broken);
    client.on('end', () => broken());
    client.on('notification', (msg) => {
      if (msg.channel === name) options.onPayload(msg.payload);
    });
    listener = client;
    try {
      await client.connect();
      await client.query(`LISTEN "${name.replaceAll('"', '""')}"`);
    } catch (err) {
      broken(err);
      throw err;
    }
  }

  function scheduleReconnect(): void {
    if (closed || reconnect) return;
    reconnect = setTimeout(() => {
      reconnect = undefined;
      listen().catch(() => undefined); // broken() already scheduled the next try
    }, options.reconnectMs ?? 1_000);
    reconnect.unref();
  }

  return {
    start: () => listen(),
    async close() {
      closed = true;
      clearTimeout(reconnect);
      const client = listener;
      listener = undefined;
      await client?.end().catch(() => undefined);
    },
  };
}
