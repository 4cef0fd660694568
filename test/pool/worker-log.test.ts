import { describe, expect, it } from 'vitest';
import { createWorkerLog } from '../../src/pool/worker-log.js';

describe('worker log', () => {
  it('keeps complete lines per stream, joining chunks and holding a partial line until its newline', () => {
    let t = 0;
    const log = createWorkerLog(10, () => ++t);
    log.write('stdout', 'one\ntw');
    log.write('stderr', 'err: bo');
    log.write('stdout', 'o\r\nthree');
    log.write('stderr', 'om\n');
    expect(log.tail().map((l) => [l.stream, l.line])).toEqual([
      ['stdout', 'one'],
      ['stdout', 'two'],
      ['stderr', 'err: boom'],
    ]);
    log.note('exited: code 3');
    log.flush();
    expect(log.tail(2).map((l) => [l.stream, l.line])).toEqual([
      ['gantry', 'exited: code 3'],
      ['stdout', 'three'],
    ]);
  });

  it('is a ring: only the last `capacity` lines stay, oldest first', () => {
    const log = createWorkerLog(3);
    for (let i = 1; i <= 7; i++) log.write('stdout', `line ${i}\n`);
    expect(log.tail().map((l) => l.line)).toEqual(['line 5', 'line 6', 'line 7']);
    expect(log.tail(2).map((l) => l.line)).toEqual(['line 6', 'line 7']);
    expect(log.tail(0)).toEqual([]);
    expect(log.tail(100)).toHaveLength(3);
  });

  it('cuts very long lines, also when the newline never comes', () => {
    const log = createWorkerLog(5);
    log.write('stdout', `${'x'.repeat(10_000)}\n`);
    log.write('stderr', 'y'.repeat(9_000));
    const [first, second] = log.tail();
    expect(first?.line.length).toBeLessThan(4_100);
    expect(first?.line.endsWith('…')).toBe(true);
    expect(second?.stream).toBe('stderr');
  });

  it('refuses a capacity below 1', () => {
    expect(() => createWorkerLog(0)).toThrow(RangeError);
  });
});
