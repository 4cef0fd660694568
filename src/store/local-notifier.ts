import type { GantryEvent, Notifier } from '../model/events.js';

/**
 * The notifier of a gateway alone on its store (SQLite): listeners run synchronously in
 * publish order; there is nobody else to tell.
 *
 * @example const notifier = createLocalNotifier(); notifier.subscribe((e) => console.log(e.type)); notifier.publish({ type: 'webhook-due' });
 */
export function createLocalNotifier(): Notifier {
  const listeners = new Set<(event: GantryEvent) => void>();
  return {
    publish(event) {
      for (const listener of listeners) listener(event);
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    start: () => Promise.resolve(),
    close: () => Promise.resolve(),
  };
}
