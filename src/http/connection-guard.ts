import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { AppError } from '../model/errors.js';
import { keyShare } from '../util/key-share.js';

/**
 * Descriptors kept free of client connections whatever the limit: the store's files (SQLite
 * database, WAL, shared memory, the checkpointer's connection), the log, libuv's own, the
 * JSON and checkpoint threads, Docker engine sockets.
 */
export const DESCRIPTOR_RESERVE = 128;

/**
 * The most client connections a gateway may hold with `fileLimit` open files: GANTRY_MAX_CONNECTIONS,
 * but never more than the limit less the reserve for what else holds descriptors: a fixed
 * DESCRIPTOR_RESERVE, an eighth of the limit (pool workers' pipes, outbound calls of the image
 * workers), the PostgreSQL pool and the webhook sender's sockets. At least 1.
 *
 * @example connectionCap({ configured: 10_000, fileLimit: 1_024, storeConnections: 0, webhookSockets: 32 }) // 736
 */
export function connectionCap(o: { configured: number; fileLimit: number | undefined; storeConnections: number; webhookSockets: number }): number {
  if (o.fileLimit === undefined) return o.configured;
  const reserve = DESCRIPTOR_RESERVE + Math.ceil(o.fileLimit / 8) + o.storeConnections + o.webhookSockets;
  return Math.max(1, Math.min(o.configured, o.fileLimit - reserve));
}

/** What the guard counts: connections open, those idle (no request in progress), those it closed to make room. */
export interface ConnectionGuard {
  open(): number;
  idle(): number;
  evicted(): number;
  /** Connections kept open at most before idle ones are closed to make room. */
  readonly roomAt: number;
}

/**
 * Caps the server's connections at `cap` (past it Node closes new ones unanswered) and keeps room
 * under it: once more than `cap − cap/20` (at most 64 below the cap) are open, the connections
 * idle longest — opened without a request yet, or kept alive after their last answer — are closed,
 * oldest first. So connections that only sit open (no key needed to open one) cannot lock other
 * clients out; a connection with a request in progress (a long-poll, a body, a stream) is never
 * closed here. Clients reconnect on a closed idle keep-alive connection.
 *
 * @example const guard = guardConnections(server, 736); guard.roomAt // 700
 */
export function guardConnections(server: Server, cap: number): ConnectionGuard {
  server.maxConnections = cap;
  const roomAt = Math.max(1, cap - Math.max(1, Math.min(64, Math.floor(cap / 20))));
  // Insertion order is the order in which they became idle: the first is the one idle longest.
  const idle = new Set<Socket>();
  // Closed by the guard, their 'close' not yet come: no longer counted as taking room.
  const closing = new Set<Socket>();
  let open = 0;
  let evicted = 0;
  server.on('connection', (socket: Socket) => {
    open++;
    idle.add(socket);
    socket.once('close', () => {
      open--;
      idle.delete(socket);
      closing.delete(socket);
    });
    let over = open - closing.size - roomAt;
    for (const oldest of idle) {
      if (over <= 0) break;
      if (oldest === socket) continue;
      idle.delete(oldest);
      closing.add(oldest);
      evicted++;
      over--;
      oldest.destroy();
    }
  });
  server.on('request', (req, res) => {
    const socket = req.socket;
    idle.delete(socket);
    res.once('finish', () => {
      if (!socket.destroyed) idle.add(socket);
    });
  });
  return { open: () => open, idle: () => idle.size, evicted: () => evicted, roomAt };
}

/**
 * The connections each key holds with a request in progress (docs/security.md, "Shared
 * limits"): a request authenticated with a key holds its connection until it is answered, and
 * one key may so hold at most **half** of the gateway's connection cap (keyShare), whether or
 * not other keys are connected: past the cap new connections are closed unanswered, so a key
 * that held them all (long-polls, streams, bodies) would leave another key no connection to
 * be refused on. Idle connections are the guard's (closed to make room, guardConnections).
 * At most one entry per connection held, so the map is bounded by the cap.
 */
export interface KeyConnections {
  /** Counts a request of `keyId` as holding its connection, or throws 429 TOO_MANY_CONNECTIONS with Retry-After past the key's half. */
  hold(keyId: string): void;
  /** The request `hold` counted has been answered (or its client went away). */
  release(keyId: string): void;
  /** The cap the halves are of (the one guardConnections enforces); until set, nothing is refused. */
  setCap(cap: number): void;
  /** Connections `keyId` holds with a request in progress. */
  held(keyId: string): number;
}

/** @example const shares = createKeyConnections(); shares.setCap(736); shares.hold('key_1'); … shares.release('key_1'); */
export function createKeyConnections(): KeyConnections {
  const byKey = new Map<string, number>();
  let share = Infinity;
  let cap = Infinity;
  return {
    hold(keyId) {
      const held = byKey.get(keyId) ?? 0;
      if (held >= share) {
        throw new AppError(
          'TOO_MANY_CONNECTIONS',
          `This key holds ${held} connections with requests in progress, its share of the gateway's ${cap} (half of the connection cap, GANTRY_MAX_CONNECTIONS or the open-file limit): retry when one is answered`,
          undefined,
          { 'retry-after': '1', connection: 'close' },
        );
      }
      byKey.set(keyId, held + 1);
    },
    release(keyId) {
      const held = (byKey.get(keyId) ?? 0) - 1;
      if (held > 0) byKey.set(keyId, held);
      else byKey.delete(keyId);
    },
    setCap(value) {
      cap = value;
      share = keyShare(value);
    },
    held: (keyId) => byKey.get(keyId) ?? 0,
  };
}
