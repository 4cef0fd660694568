-- 0005_job_minutes: per-minute aggregates of each endpoint's jobs for the console's charts
-- (src/store/minute-store.ts). Additive: every gateway adds its own counts to the same rows.
CREATE TABLE job_minutes (
  endpoint_id TEXT NOT NULL,
  minute      INTEGER NOT NULL,
  submitted   INTEGER NOT NULL DEFAULT 0,
  completed   INTEGER NOT NULL DEFAULT 0,
  failed      INTEGER NOT NULL DEFAULT 0,
  queue_depth INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (endpoint_id, minute)
);

-- Histogram buckets of queue delay (kind 0) and execution time (kind 1); only non-empty ones.
CREATE TABLE job_minute_buckets (
  endpoint_id TEXT NOT NULL,
  minute      INTEGER NOT NULL,
  kind        INTEGER NOT NULL,
  bucket      INTEGER NOT NULL,
  count       INTEGER NOT NULL,
  PRIMARY KEY (endpoint_id, minute, kind, bucket)
);
