// W3C traceparent as jobs use it (src/model/trace-context.ts): what is accepted from a client,
// and the run span id every gateway derives alike.
import { describe, expect, it } from 'vitest';
import { formatTraceparent, parseTraceparent, runSpanId, runTraceparent } from '../../src/model/trace-context.js';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const SPAN = '00f067aa0ba902b7';

describe('traceparent', () => {
  it('parses a valid header and formats it back', () => {
    const header = `00-${TRACE}-${SPAN}-01`;
    expect(parseTraceparent(header)).toEqual({ traceId: TRACE, spanId: SPAN, flags: 1 });
    expect(formatTraceparent(parseTraceparent(header)!)).toBe(header);
    // A later version may carry more fields; its first four are read.
    expect(parseTraceparent(`01-${TRACE}-${SPAN}-00-extra`)).toEqual({ traceId: TRACE, spanId: SPAN, flags: 0 });
  });

  it('ignores what the specification says to ignore', () => {
    for (const bad of [undefined, '', 'garbage', `ff-${TRACE}-${SPAN}-01`, `00-${'0'.repeat(32)}-${SPAN}-01`, `00-${TRACE}-${'0'.repeat(16)}-01`, `00-${TRACE.toUpperCase()}-${SPAN}-01`, `00-${TRACE}-${SPAN}-01-extra`, `00-${TRACE}-${SPAN}`]) {
      expect(parseTraceparent(bad)).toBeUndefined();
    }
  });

  it("derives each run's span id from the job, its retries and its run, the same everywhere", () => {
    const id = runSpanId('job-1', 0, 1);
    expect(id).toMatch(/^[0-9a-f]{16}$/);
    expect(runSpanId('job-1', 0, 1)).toBe(id);
    expect(new Set([id, runSpanId('job-1', 0, 2), runSpanId('job-1', 1, 1), runSpanId('job-2', 0, 1)]).size).toBe(4);
    const job = { id: 'job-1', traceparent: `00-${TRACE}-${SPAN}-01`, retries: 0, attempts: 1, preemptions: 0 };
    expect(runTraceparent(job)).toBe(`00-${TRACE}-${id}-01`);
    // A preempted run counts: attempts 1 + preemptions 1 is the second run.
    expect(runTraceparent({ ...job, preemptions: 1 })).toBe(`00-${TRACE}-${runSpanId('job-1', 0, 2)}-01`);
    expect(runTraceparent({ ...job, traceparent: null })).toBeUndefined();
  });
});
