-- 0012_meters (docs/api.md, "Usage"): every job that ran is metered, not only the image
-- endpoints' completed ones, and every pool worker's life from start to stop.

-- One row per run of a job that reached a terminal state: execution time (start to result)
-- for the key that submitted it, the image size of a completed image job, and what it cost
-- (integer units of 1e-10 USD, so sums are exact). A retry runs the job again under the same
-- id: `run` (the job's retry count) keeps each run's row, and writing a run twice is a no-op.
CREATE TABLE job_meters (
  job_id       TEXT NOT NULL,
  run          INTEGER NOT NULL,
  key_id       TEXT,
  endpoint_id  TEXT NOT NULL,
  status       TEXT NOT NULL,
  execution_ms INTEGER NOT NULL,
  pixels       INTEGER NOT NULL,
  cost_units   INTEGER NOT NULL,
  created_at   INTEGER NOT NULL,
  PRIMARY KEY (job_id, run)
);
INSERT INTO job_meters (job_id, run, key_id, endpoint_id, status, execution_ms, pixels, cost_units, created_at)
  SELECT job_id, 0, key_id, endpoint_id, 'COMPLETED', 0, pixels, cost_units, created_at FROM usage_records;
DROP TABLE usage_records;

-- Usage over a time range; a key's spend in its budget period.
CREATE INDEX job_meters_created ON job_meters (created_at);
CREATE INDEX job_meters_key_created ON job_meters (key_id, created_at);

-- One row per pool worker process, start to stop (cold start, idle and running, as RunPod
-- bills). ended_at is moved forward while the worker runs and set once at its stop (open 0);
-- a gateway killed with the worker leaves the last time it saw it running.
CREATE TABLE worker_meters (
  worker_id   TEXT NOT NULL,
  started_at  INTEGER NOT NULL,
  endpoint_id TEXT NOT NULL,
  gpus        INTEGER NOT NULL,
  ended_at    INTEGER NOT NULL,
  open        INTEGER NOT NULL,
  PRIMARY KEY (worker_id, started_at)
);
CREATE INDEX worker_meters_started ON worker_meters (started_at);

-- USD per second of execution, in units of 1e-10 USD; NULL: metered, not priced.
ALTER TABLE endpoints ADD COLUMN price_units_per_second INTEGER;

-- A key's budget (units of 1e-10 USD per 'day' or 'month', UTC) and its cap on live jobs.
ALTER TABLE api_keys ADD COLUMN budget_units INTEGER;
ALTER TABLE api_keys ADD COLUMN budget_period TEXT;
ALTER TABLE api_keys ADD COLUMN max_concurrent_jobs INTEGER;

-- maxConcurrentJobs: a key's queued and running jobs, counted at each submit of a capped key.
CREATE INDEX jobs_key_live ON jobs (key_id) WHERE status IN ('IN_QUEUE', 'IN_PROGRESS');
