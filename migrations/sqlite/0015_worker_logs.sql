-- 0015_worker_logs: every line a pool worker printed (and Gantry's own notes about it), kept
-- GANTRY_LOG_KEEP_DAYS and at most GANTRY_LOG_MAX_LINES_PER_ENDPOINT per endpoint
-- (src/store/log-store.ts). Written in batches by the leader's log writer (src/pool/log-writer.ts);
-- the id is the order lines were stored in, and the cursor of reads and follows.
CREATE TABLE worker_logs (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  at          INTEGER NOT NULL,
  endpoint_id TEXT NOT NULL,
  worker_id   TEXT NOT NULL,
  job_id      TEXT,
  stream      TEXT NOT NULL,
  level       TEXT,
  line        TEXT NOT NULL
);
CREATE INDEX worker_logs_endpoint ON worker_logs (endpoint_id, id);
CREATE INDEX worker_logs_worker ON worker_logs (worker_id, id);
CREATE INDEX worker_logs_job ON worker_logs (job_id, id) WHERE job_id IS NOT NULL;
CREATE INDEX worker_logs_at ON worker_logs (at);
