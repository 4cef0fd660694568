// A real EventSource (the `eventsource` npm package, which follows the WHATWG spec) reading
// /v2/{endpoint}/stream/{id}, with the events it received in order and a way to wait for one.
import { EventSource } from 'eventsource';

export interface ReceivedEvent {
  type: string;
  data: string;
  lastEventId: string;
}

export interface StreamReader {
  source: EventSource;
  events: ReceivedEvent[];
  /** Resolves with the first event `match` accepts, received already or yet to come. */
  waitFor(match: (event: ReceivedEvent) => boolean, what: string, timeoutMs?: number): Promise<ReceivedEvent>;
  /** Resolves with the `error` event (a refused connection carries the HTTP status as `code`). */
  failed: Promise<{ code?: number; message?: string }>;
  close(): void;
}

/** Opens an EventSource with the API key (the package's `fetch` option adds the header). */
export function readStream(url: string, key: string): StreamReader {
  const source = new EventSource(url, {
    fetch: (input, init) => fetch(input, { ...init, headers: { ...init.headers, authorization: `Bearer ${key}` } }),
  });
  const events: ReceivedEvent[] = [];
  const listeners = new Set<() => void>();
  const record = (event: MessageEvent): void => {
    events.push({ type: event.type, data: event.data as string, lastEventId: event.lastEventId });
    for (const notify of [...listeners]) notify();
  };
  for (const type of ['message', 'status', 'done']) source.addEventListener(type, record);
  const failed = new Promise<{ code?: number; message?: string }>((resolve) => {
    source.addEventListener('error', (event) => resolve({ code: event.code, message: event.message }));
  });
  const waitFor = (match: (event: ReceivedEvent) => boolean, what: string, timeoutMs = 15_000): Promise<ReceivedEvent> =>
    new Promise((resolve, reject) => {
      const finish = (then: () => void): void => {
        clearTimeout(timer);
        listeners.delete(check);
        then();
      };
      const check = (): void => {
        const found = events.find(match);
        if (found) finish(() => resolve(found));
      };
      const timer = setTimeout(() => finish(() => reject(new Error(`timed out waiting for the event: ${what}`))), timeoutMs);
      listeners.add(check);
      check();
    });
  return { source, events, waitFor, failed, close: () => source.close() };
}

/** The JSON of an event's data. */
export function dataOf(event: ReceivedEvent): Record<string, unknown> {
  return JSON.parse(event.data) as Record<string, unknown>;
}
