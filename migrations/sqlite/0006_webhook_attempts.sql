-- 0006_webhook_attempts: what each webhook delivery attempt of a job met (the console's job
-- page shows them). A status or a short error class only: never the receiver's body or the
-- webhook URL. The webhook sender keeps a job's newest 10 (store.ts, WEBHOOK_ATTEMPTS_KEPT);
-- they go with the job (ON DELETE CASCADE: retention, purge, endpoint deletion).
CREATE TABLE webhook_attempts (
  job_id      TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  seq         INTEGER NOT NULL,
  retries     INTEGER NOT NULL,
  attempt     INTEGER NOT NULL,
  at          INTEGER NOT NULL,
  http_status INTEGER,
  error       TEXT,
  PRIMARY KEY (job_id, seq)
) WITHOUT ROWID;
