import type { GantryEvent } from '../../model/events.js';

/**
 * The wire format of the events gateways send each other through NOTIFY: one JSON payload
 * `{"o": origin, "e": [wire events]}`, each event a short array, so one notification carries a
 * whole turn's events. Pure functions, apart from the connection (notifier.ts).
 */

/** NOTIFY payloads must stay under 8,000 bytes. */
export const MAX_PAYLOAD = 7_500;

/** Compact wire form of one event. */
export type Wire = ['a', string] | ['u', string] | ['s', string, string[]] | ['r', string, string] | ['x', string, string] | ['v', string, string] | ['c', string] | ['w'] | ['l'];

/**
 * Coalesces a batch of events into wire events: duplicates dropped (one 'jobs-available' per
 * endpoint, one 'job-updated' per job, …), the stop lists of one worker merged into one event.
 *
 * @example coalesce([{ type: 'webhook-due' }, { type: 'webhook-due' }]) // [['w']]
 */
export function coalesce(events: GantryEvent[]): Wire[] {
  const seen = new Set<string>();
  const stops = new Map<string, Set<string>>();
  const wire: Wire[] = [];
  const once = (key: string, w: Wire): void => {
    if (seen.has(key)) return;
    seen.add(key);
    wire.push(w);
  };
  // A worker stopping (or paused) and resumed in one turn: only its last word counts.
  const marks = new Map<string, number>();
  const last = (workerId: string, w: Wire): void => {
    const at = marks.get(workerId);
    if (at === undefined) marks.set(workerId, wire.push(w) - 1);
    else wire[at] = w;
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
      case 'worker-stopping':
        last(e.workerId, ['x', e.workerId, e.endpointId]);
        break;
      case 'worker-resuming':
        last(e.workerId, ['v', e.workerId, e.endpointId]);
        break;
      case 'endpoint-changed':
        once(`c${e.endpointId}`, ['c', e.endpointId]);
        break;
      case 'webhook-due':
        once('w', ['w']);
        break;
      case 'logs-stored':
        once('l', ['l']);
        break;
    }
  }
  for (const [workerId, ids] of stops) wire.push(['s', workerId, [...ids]]);
  return wire;
}

/**
 * Packs wire events from gateway `origin` into as few payloads under `maxPayload` as they fit
 * in (usually one).
 */
export function pack(origin: string, wire: Wire[], maxPayload = MAX_PAYLOAD): string[] {
  const head = `{"o":${JSON.stringify(origin)},"e":[`;
  const payloads: string[] = [];
  let parts: string[] = [];
  let size = head.length + 2;
  for (const w of wire) {
    const text = JSON.stringify(w);
    if (parts.length > 0 && size + text.length + 1 > maxPayload) {
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

/** One wire event → the event it stands for (undefined for a kind this code does not know). */
function toEvent(w: Wire): GantryEvent | undefined {
  switch (w[0]) {
    case 'a':
      return { type: 'jobs-available', endpointId: w[1] };
    case 'u':
      return { type: 'job-updated', jobId: w[1] };
    case 's':
      return { type: 'stop-jobs', workerId: w[1], jobIds: w[2] };
    case 'r':
      return { type: 'worker-recycle', workerId: w[1], endpointId: w[2] };
    case 'x':
      return { type: 'worker-stopping', workerId: w[1], endpointId: w[2] };
    case 'v':
      return { type: 'worker-resuming', workerId: w[1], endpointId: w[2] };
    case 'c':
      return { type: 'endpoint-changed', endpointId: w[1] };
    case 'w':
      return { type: 'webhook-due' };
    case 'l':
      return { type: 'logs-stored' };
    default:
      return undefined;
  }
}

/**
 * The events of a payload another gateway sent; none for a payload of `origin` itself (it
 * delivered them at once) or one that is not ours to read.
 */
export function unpack(payload: string | undefined, origin: string): GantryEvent[] {
  if (!payload) return [];
  let message: { o: string; e: Wire[] };
  try {
    message = JSON.parse(payload) as { o: string; e: Wire[] };
  } catch {
    return [];
  }
  if (message.o === origin || !Array.isArray(message.e)) return [];
  const events: GantryEvent[] = [];
  for (const w of message.e) {
    const event = toEvent(w);
    if (event) events.push(event);
  }
  return events;
}
