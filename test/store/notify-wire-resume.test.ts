// The NOTIFY wire (src/store/postgres/notify-wire.ts) carries flashboot's `worker-resuming` to
// the other gateways; a worker stopped and resumed within one turn arrives as its last word.
import { describe, expect, it } from 'vitest';
import type { GantryEvent } from '../../src/model/events.js';
import { coalesce, pack, unpack } from '../../src/store/postgres/notify-wire.js';

const roundTrip = (events: GantryEvent[]): GantryEvent[] => pack('me', coalesce(events)).flatMap((p) => unpack(p, 'other'));

describe('worker-resuming on the notify wire', () => {
  it('reads back as sent, once per worker', () => {
    const resuming: GantryEvent = { type: 'worker-resuming', workerId: 'w1', endpointId: 'ep' };
    expect(roundTrip([resuming, resuming])).toEqual([resuming]);
  });

  it('keeps only the last of a stop and a resume of one worker in a turn, in its place', () => {
    const stop = (workerId: string): GantryEvent => ({ type: 'worker-stopping', workerId, endpointId: 'ep' });
    const resume = (workerId: string): GantryEvent => ({ type: 'worker-resuming', workerId, endpointId: 'ep' });
    const changed: GantryEvent = { type: 'endpoint-changed', endpointId: 'ep' };
    expect(roundTrip([stop('a'), changed, resume('a'), stop('b')])).toEqual([resume('a'), changed, stop('b')]);
    expect(roundTrip([resume('a'), stop('a')])).toEqual([stop('a')]);
  });
});
