import { RandomIdGenerator, type IdGenerator } from '@opentelemetry/sdk-trace-base';

/**
 * Random trace and span ids, except a span id set in `next` beforehand: the tracer asks for
 * exactly one span id per span it starts, first thing, so setting `next` just before
 * `startSpan` gives that span the id (a job's run spans: model/trace-context.ts). Single
 * threaded, so nothing else can start a span in between.
 */
export class PresetSpanIds implements IdGenerator {
  next: string | undefined;
  private readonly random = new RandomIdGenerator();

  generateTraceId(): string {
    return this.random.generateTraceId();
  }

  generateSpanId(): string {
    const id = this.next;
    if (id === undefined) return this.random.generateSpanId();
    this.next = undefined;
    return id;
  }
}
