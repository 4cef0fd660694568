-- 0017_job_traceparent: a job's trace context, so every gateway continues the job's trace
-- (src/tracing/, docs/observability.md). jobs.traceparent: the W3C traceparent of the job's
-- submit span, written at the submit while tracing is on (OTEL_* variables); NULL otherwise,
-- so a gateway without tracing stores nothing more per job than before.
ALTER TABLE jobs ADD COLUMN traceparent TEXT;
