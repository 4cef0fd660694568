import { randomUUID } from 'node:crypto';
import pg from 'pg';
import type { Logger } from 'pino';
import type { PgConnection } from '../store/postgres/connection.js';
import type { GantryEvent, Notifier } from './notifier.js';

/** NOTIFY payloads must stay under 8,000 bytes. */
const MAX_PAYLOAD = 7_500;

export interface PgNotifier extends Notifier {
  /** Connects the LISTEN connection (and keeps reconnecting it until close). */
  start(): Promise<void>;
  close(): Promise<void>;
}

export interface PgNotifierOptions {
  connection: PgConnection;
  logger: Logger;
  /** Delay before a broken LISTEN connection is reopened (default 1 s). */
  reconnectMs?: number;
}

/** Compact wire form of one event. */
type Wire =
  | ['a', string]
  | ['u', string]
  | ['s', string, string[]]
  | ['r', string, string]
  | ['c', string]
  | ['w'];

/**
 * A Notifier for gateways sharing one PostgreSQL database: every event reaches this gateway's
 * listeners at once (as createLocalNotifier does) and the other gateways' through
 * LISTEN/NOTIFY. Events stay wake-ups only: the events of one event-loop turn — and of every
 * turn while a NOTIFY is in flight — are coalesced (one 'jobs-available' per endpoint, job ids
 * merged) into one notification, so a gateway sends at most one NOTIFY at a time. A lost
 * notification only delays: take queues and job waiters re-read the store periodically.
 *
 * The channel is per schema, so Gantry installs in different schemas of one database never
 * wake each other.
 */
export function createPgNotifier(options: PgNotifierOptions): PgNotifier {
  const { connection, logger } = options;
  const origin = randomUUID().slice(0, 8);
  const listeners = new Set<(event: GantryEvent) => void>();
  let channel: string | undefined;
  let outgoing: GantryEvent[] = [];
  let scheduled = false;
  let sending: Promise<void> | undefined;
  let listener: pg.Client | undefined;
  let reconnect: NodeJS.Timeout | undefined;
  let closed = false;

  function deliver(event: GantryEvent): void {
    for (const fn of listeners) {
      try {
        fn(event);
      } catch (err) {
        logger.error({ err, event: event.type }, 'event listener failed');
      }
    }
  }

  /** Coalesces a batch of events into wire events (duplicates dropped, stop lists merged). */
  function coalesce(events: GantryEvent[]): Wire[] {
    const seen = new Set<string>();
    const stops = new Map<string, Set<string>>();
    const wire: Wire[] = [];
    const once = (key: string, w: Wire): void => {
      if (seen.has(key)) return;
      seen.add(key);
      wire.push(w);
    };
    for (const e of events) {
      switch (e.type) {
        case 'jobs-available':
          once(`a${e.endpointId}`, ['a', e.endpointId]);
          break;
        case 'job-updated':
          once(`u${e.jobId}`, ['u', e.jobId]);
          break;
        case 'stop-jobs': {
          let set = stops.get(e.workerId);
          if (!set) stops.set(e.workerId, (set = new Set()));
          for (const id of e.jobIds) set.add(id);
          break;
        }
        case 'worker-recycle':
          once(`r${e.workerId}`, ['r', e.workerId, e.endpointId]);
          break;
        case 'endpoint-changed':
          once(`c${e.endpointId}`, ['c', e.endpointId]);
          break;
        case 'webhook-due':
          once('w', ['w']);
          break;
      }
    }
    for (const [workerId, ids] of stops) wire.push(['s', workerId, [...ids]]);
    return wire;
  }

  /** Packs wire events into as few payloads under MAX_PAYLOAD as they fit in (usually one). */
  function pack(wire: Wire[]): string[] {
    const head = `{"o":${JSON.stringify(origin)},"e":[`;
    const payloads: string[] = [];
    let parts: string[] = [];
    let size = head.length + 2;
    for (const w of wire) {
      const text = JSON.stringify(w);
      if (parts.length > 0 && size + text.length + 1 > MAX_PAYLOAD) {
        payloads.push(`${head}${parts.join(',')}]}`);
        parts = [];
        size = head.length + 2;
      }
      parts.push(text);
      size += text.length + 1;
    }
    if (parts.length > 0) payloads.push(`${head}${parts.join(',')}]}`);
    return payloads;
  }

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
      const name = channel ?? (channel = `gantry:${await connection.schema()}`);
      const payloads = pack(coalesce(events));
      const calls = payloads.map((_, i) => `pg_notify($1, $${i + 2})`).join(', ');
      await connection.query(`SELECT ${calls}`, [name, ...payloads]);
    } catch (err) {
      if (!closed) logger.warn({ err }, 'NOTIFY failed; other gateways will see the change at their next poll');
    }
  }

  function receive(payload: string | undefined): void {
    if (!payload) return;
    let message: { o: string; e: Wire[] };
    try {
      message = JSON.parse(payload) as { o: string; e: Wire[] };
    } catch {
      return;
    }
    if (message.o === origin || !Array.isArray(message.e)) return;
    for (const w of message.e) {
      switch (w[0]) {
        case 'a':
          deliver({ type: 'jobs-available', endpointId: w[1] });
          break;
        case 'u':
          deliver({ type: 'job-updated', jobId: w[1] });
          break;
        case 's':
          deliver({ type: 'stop-jobs', workerId: w[1], jobIds: w[2] });
          break;
        case 'r':
          deliver({ type: 'worker-recycle', workerId: w[1], endpointId: w[2] });
          break;
        case 'c':
          deliver({ type: 'endpoint-changed', endpointId: w[1] });
          break;
        case 'w':
          deliver({ type: 'webhook-due' });
          break;
      }
    }
  }

  async function listen(): Promise<void> {
    const name = channel ?? (channel = `gantry:${await connection.schema()}`);
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
      if (msg.channel === name) receive(msg.payload);
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
    start: () => listen(),
    async close() {
      if (closed) return;
      if (scheduled || outgoing.length > 0) flush();
      await sending;
      closed = true;
      clearTimeout(reconnect);
      const client = listener;
      listener = undefined;
      await client?.end().catch(() => undefined);
    },
  };
}
