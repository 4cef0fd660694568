-- 0001_init: the initial schema, the PostgreSQL twin of migrations/sqlite/0001_init.sql (same
-- tables, columns and index names; types are PostgreSQL's). Migrations are append-only: never
-- edit this file once it has landed; add 0002_... instead, under both folders.
-- Times are epoch milliseconds (BIGINT); JSON documents are stored as TEXT so the hot path
-- never parses and re-serialises them. Unqualified names: the schema is the connection's
-- search_path (one Gantry per schema).

-- The ledger. The migration runner also creates it before reading it, so the statement must
-- stay idempotent.
CREATE TABLE IF NOT EXISTS schema_migrations (
  version    INTEGER PRIMARY KEY,
  name       TEXT NOT NULL,
  applied_at BIGINT NOT NULL
);

CREATE TABLE endpoints (
  id                   TEXT PRIMARY KEY,
  name                 TEXT NOT NULL,
  workers_min          INTEGER NOT NULL,
  workers_max          INTEGER NOT NULL,
  idle_timeout         INTEGER NOT NULL,
  execution_timeout_ms BIGINT NOT NULL,
  scaler_type          TEXT NOT NULL CHECK (scaler_type IN ('QUEUE_DELAY', 'REQUEST_COUNT')),
  scaler_value         INTEGER NOT NULL,
  max_attempts         INTEGER NOT NULL,
  worker_json          TEXT,
  created_at           BIGINT NOT NULL,
  updated_at           BIGINT NOT NULL
);

-- No foreign key to endpoints (as in SQLite): built-in endpoints take jobs without a row.
-- seq is the insertion order that breaks queue-order ties (SQLite's rowid).
CREATE TABLE jobs (
  id                   TEXT PRIMARY KEY,
  seq                  BIGINT GENERATED ALWAYS AS IDENTITY,
  endpoint_id          TEXT NOT NULL,
  status               TEXT NOT NULL CHECK (status IN ('IN_QUEUE', 'IN_PROGRESS', 'COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT')),
  input_json           TEXT NOT NULL,
  output_json          TEXT,
  error                TEXT,
  webhook              TEXT,
  s3_config            TEXT,
  execution_timeout_ms BIGINT NOT NULL,
  low_priority         BOOLEAN NOT NULL DEFAULT FALSE,
  ttl_ms               BIGINT NOT NULL,
  retention_ms         BIGINT NOT NULL,
  max_attempts         INTEGER NOT NULL,
  sync                 BOOLEAN NOT NULL DEFAULT FALSE,
  key_id               TEXT,
  created_at           BIGINT NOT NULL,
  queued_at            BIGINT NOT NULL,
  started_at           BIGINT,
  finished_at          BIGINT,
  deadline_at          BIGINT,
  expires_at           BIGINT,
  worker_id            TEXT,
  attempts             INTEGER NOT NULL DEFAULT 0,
  retries              INTEGER NOT NULL DEFAULT 0,
  webhook_attempts     INTEGER NOT NULL DEFAULT 0,
  webhook_next_at      BIGINT
);

-- The queue table is hot: every job is inserted, updated two or three times and deleted.
-- Vacuum it after 2% of its rows are dead (default 20%) or 1,000 dead rows, analyze after 5%,
-- and let autovacuum work without its cost-based pauses, so dead tuples never pile up in the
-- claim index. Kept as a fillfactor below 100 so most updates stay HOT (same page).
-- See docs/postgres.md, "Table health".
ALTER TABLE jobs SET (
  fillfactor = 80,
  autovacuum_vacuum_scale_factor = 0.02,
  autovacuum_vacuum_threshold = 1000,
  autovacuum_vacuum_insert_scale_factor = 0.05,
  autovacuum_analyze_scale_factor = 0.05,
  autovacuum_vacuum_cost_delay = 0
);

-- claimJobs: oldest queued job of an endpoint first, insertion order breaking ties.
CREATE INDEX jobs_claim ON jobs (endpoint_id, queued_at, seq) WHERE status = 'IN_QUEUE';
-- timeOutRunning / expireQueued: only live jobs have a deadline.
CREATE INDEX jobs_deadline ON jobs (status, deadline_at) WHERE deadline_at IS NOT NULL;
-- deleteExpired: only terminal jobs have an expiry.
CREATE INDEX jobs_expires ON jobs (expires_at) WHERE expires_at IS NOT NULL;
-- dueWebhooks: the outbox.
CREATE INDEX jobs_webhook_next ON jobs (webhook_next_at) WHERE webhook_next_at IS NOT NULL;
-- jobsHeldBy / releaseWorkerJobs.
CREATE INDEX jobs_worker ON jobs (worker_id) WHERE status = 'IN_PROGRESS';
-- listJobs (newest first) and countJobs.
CREATE INDEX jobs_endpoint_created ON jobs (endpoint_id, created_at);

-- Buffered stream chunks of a job. seq is one sequence for all jobs: a job's chunks are read
-- in seq order, and appends never have to read the last number first.
CREATE TABLE job_stream (
  job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  seq    BIGINT GENERATED ALWAYS AS IDENTITY,
  chunk  TEXT NOT NULL,
  PRIMARY KEY (job_id, seq)
);

CREATE TABLE workers (
  id            TEXT PRIMARY KEY,
  endpoint_id   TEXT NOT NULL,
  first_seen_at BIGINT NOT NULL,
  last_seen_at  BIGINT NOT NULL,
  healthy       BOOLEAN NOT NULL DEFAULT TRUE,
  reason        TEXT,
  version       TEXT
);

CREATE INDEX workers_endpoint ON workers (endpoint_id);
CREATE INDEX workers_last_seen ON workers (last_seen_at);

-- scopes: JSON array of scope names; endpoints: JSON array of endpoint ids, or NULL for all.
CREATE TABLE api_keys (
  id         TEXT PRIMARY KEY,
  name       TEXT NOT NULL,
  hash       TEXT NOT NULL,
  scopes     TEXT NOT NULL,
  endpoints  TEXT,
  created_at BIGINT NOT NULL
);

CREATE UNIQUE INDEX api_keys_hash ON api_keys (hash);
