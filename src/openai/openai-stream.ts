import type { ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { followJob, openSse, SSE_HEARTBEAT_MS, type FollowedRun, type SseWriter } from '../http/sse.js';
import type { JobService, StreamRead } from '../jobs/job-service.js';
import { AppError } from '../model/errors.js';
import type { JobRecord } from '../model/records.js';
import { GATEWAY_CLOSING, jobFailure, NO_RETRY, openAiErrorBody, workerError } from './openai-errors.js';

const DONE = 'data: [DONE]\n\n';

/**
 * The answer with `"stream": true`: server-sent events built from the job's stream chunks as
 * they arrive (no polling: the worker's job-stream post wakes this loop), ending with
 * `data: [DONE]` unless the worker sent it. A string chunk is written as it is (RunPod's vLLM
 * worker yields ready-made SSE text), an object as one `data: <json>` event, a list element by
 * element. The answer is one run's: when the job's worker is lost after chunks went out, the
 * stream ends with STREAM_RESTARTED instead of going on into the next run (docs/openai.md).
 * Until the first byte goes out a failure is still an ordinary HTTP error (thrown);
 * after it, an in-stream `data: {"error": ...}` event (also when `signal` is aborted with
 * GATEWAY_CLOSING: the gateway's shutdown). Resolves with the job as last read.
 *
 * @example const job = await sendOpenAiStream({ jobs, logger }, res, 'llm', submitted, signal);
 */
export async function sendOpenAiStream(
  deps: { jobs: Pick<JobService, 'watchStream' | 'delivered'>; logger: Logger },
  res: ServerResponse,
  endpointId: string,
  job: JobRecord,
  signal: AbortSignal,
  heartbeatMs: number = SSE_HEARTBEAT_MS,
): Promise<JobRecord | undefined> {
  const sse = openSse(res);
  const events = new OpenAiEvents(sse);
  let end: JobRecord | undefined;
  try {
    const follower = {
      // A second run never continues the answer: once the first run's chunks have gone out, its
      // loss ends the stream with an error the client can act on (send the request again).
      async status(current: JobRecord, run: FollowedRun): Promise<void> {
        if (run.restarted && events.written > 0) throw streamRestarted(current.id, run.attempt);
      },
      async chunks(chunks: string[], page: StreamRead): Promise<void> {
        await events.chunks(chunks);
        if (page.truncated) throw streamTruncated(job.id);
      },
      idle: () => sse.comment('keep-alive'),
    };
    end = await followJob(deps.jobs, sse, endpointId, job.id, signal, follower, heartbeatMs);
    if (!sse.open) return end;
    if (signal.aborted) {
      // The gateway closing: 503, or an in-stream error and [DONE] once the stream has begun.
      if (signal.reason === GATEWAY_CLOSING) throw GATEWAY_CLOSING;
      return end;
    }
    if (!end) throw new AppError('JOB_NOT_FOUND', `Job ${job.id} no longer exists`);
    if (end.status !== 'COMPLETED') throw jobFailure(end);
    // A worker that did not stream: its output, if any, is the stream.
    if (events.written === 0 && end.outputJson !== null) await events.chunks([end.outputJson]);
  } catch (err) {
    if (!sse.started) throw err;
    if (!(err instanceof AppError)) deps.logger.error({ err, endpointId, jobId: job.id }, 'openai stream failed');
    await events.error(err instanceof AppError ? err : new AppError('INTERNAL', 'Internal server error'));
  }
  await events.finish();
  sse.end();
  return end;
}

/** The byte cap cut the job's stream (its reader fell that far behind): the answer cannot be whole. */
function streamTruncated(jobId: string): AppError {
  return new AppError('STREAM_TRUNCATED', `Job ${jobId}: the stream was cut after GANTRY_STREAM_BUFFER_BYTES of it waited unread; the answer above is incomplete`, undefined, NO_RETRY);
}

/**
 * The worker streaming the answer was lost and the job runs again from its start: what was sent
 * cannot be continued. The client sends the request again (the gateway cancels this job).
 */
function streamRestarted(jobId: string, attempt: number): AppError {
  return new AppError(
    'STREAM_RESTARTED',
    `Job ${jobId}: the worker streaming this answer was lost and the job started again from the beginning (attempt ${attempt}); the answer above is incomplete: send the request again`,
    undefined,
    NO_RETRY,
  );
}

/** Writes the job's chunks as OpenAI stream events; remembers whether the worker sent `[DONE]`. */
class OpenAiEvents {
  written = 0;
  private done = false;

  constructor(private readonly sse: SseWriter) {}

  async chunks(chunks: string[]): Promise<void> {
    for (const chunk of chunks) {
      // The common object chunk goes out as stored, without parsing it.
      if (chunk.startsWith('{') && !chunk.includes('"error"')) await this.event(chunk);
      else await this.value(JSON.parse(chunk) as unknown);
    }
  }

  async error(err: AppError): Promise<void> {
    await this.event(JSON.stringify(openAiErrorBody(err)));
  }

  async finish(): Promise<void> {
    if (!this.done && this.sse.open) await this.sse.raw(DONE);
  }

  private async value(value: unknown): Promise<void> {
    if (typeof value === 'string') {
      this.written++;
      if (value.includes(DONE.trim())) this.done = true;
      return this.sse.raw(value);
    }
    if (Array.isArray(value)) {
      for (const item of value) await this.value(item);
      return;
    }
    const error = workerError(value);
    // Before the first byte, a worker's error is the HTTP answer (the caller cancels the job).
    if (error && !this.sse.started) throw error;
    if (error) return this.error(error);
    return this.event(JSON.stringify(value));
  }

  private event(json: string): Promise<void> {
    this.written++;
    return this.sse.event(json);
  }
}
