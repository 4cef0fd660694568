-- 0001_init: the initial schema. Migrations are append-only: never edit this file once it has
-- landed; add 0002_... instead (and the same number and name under migrations/postgres/).
-- Times are epoch milliseconds; booleans are 0/1; JSON documents are stored as text.

-- The ledger. The migration runner also creates it before reading it, so the statement must
-- stay idempotent.
CREATE TABLE IF NOT EXISTS schema_migrations (
  version    INTEGER PRIMARY KEY,
  name       TEXT NOT NULL,
  applied_at INTEGER NOT NULL
);

CREATE TABLE endpoints (
  id                   TEXT PRIMARY KEY,
  name                 TEXT NOT NULL,
  workers_min          INTEGER NOT NULL,
  workers_max          INTEGER NOT NULL,
  idle_timeout         INTEGER NOT NULL,
  execution_timeout_ms INTEGER NOT NULL,
  scaler_type          TEXT NOT NULL CHECK (scaler_type IN ('QUEUE_DELAY', 'REQUEST_COUNT')),
  scaler_value         INTEGER NOT NULL,
  max_attempts         INTEGER NOT NULL,
  worker_json          TEXT,
  created_at           INTEGER NOT NULL,
  updated_at           INTEGER NOT NULL
);

-- No foreign key to endpoints: built-in endpoints (e.g. the image endpoints) take jobs without
-- an endpoints row. deleteEndpoint removes an endpoint's jobs and workers explicitly.
-- A rowid table on purpose: rowid is the insertion order that breaks queue-order ties.
CREATE TABLE jobs (
  id                   TEXT PRIMARY KEY,
  endpoint_id          TEXT NOT NULL,
  status               TEXT NOT NULL CHECK (status IN ('IN_QUEUE', 'IN_PROGRESS', 'COMPLETED', 'FAILED', 'CANCELLED', 'TIMED_OUT')),
  input_json           TEXT NOT NULL,
  output_json          TEXT,
  error                TEXT,
  webhook              TEXT,
  s3_config            TEXT,
  execution_timeout_ms INTEGER NOT NULL,
  low_priority         INTEGER NOT NULL DEFAULT 0,
  ttl_ms               INTEGER NOT NULL,
  retention_ms         INTEGER NOT NULL,
  max_attempts         INTEGER NOT NULL,
  sync                 INTEGER NOT NULL DEFAULT 0,
  key_id               TEXT,
  created_at           INTEGER NOT NULL,
  queued_at            INTEGER NOT NULL,
  started_at           INTEGER,
  finished_at          INTEGER,
  deadline_at          INTEGER,
  expires_at           INTEGER,
  worker_id            TEXT,
  attempts             INTEGER NOT NULL DEFAULT 0,
  retries              INTEGER NOT NULL DEFAULT 0,
  webhook_attempts     INTEGER NOT NULL DEFAULT 0,
  webhook_next_at      INTEGER
);

-- claimJobs: oldest queued job of an endpoint first (rowid is implicitly the last key).
CREATE INDEX jobs_claim ON jobs (endpoint_id, queued_at) WHERE status = 'IN_QUEUE';
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

-- Buffered stream chunks of a job; seq counts from 1 per job.
CREATE TABLE job_stream (
  job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  seq    INTEGER NOT NULL,
  chunk  TEXT NOT NULL,
  PRIMARY KEY (job_id, seq)
) WITHOUT ROWID;

CREATE TABLE workers (
  id            TEXT PRIMARY KEY,
  endpoint_id   TEXT NOT NULL,
  first_seen_at INTEGER NOT NULL,
  last_seen_at  INTEGER NOT NULL,
  healthy       INTEGER NOT NULL DEFAULT 1,
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
  created_at INTEGER NOT NULL
);

CREATE UNIQUE INDEX api_keys_hash ON api_keys (hash);
