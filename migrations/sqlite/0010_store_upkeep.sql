-- 0010_store_upkeep: what the store needs to look after itself (issue 22).
-- store_probe: one row a gateway writes while its store faults (full disk, a restarting
-- database), to learn when a write commits again (src/store/store-faults.ts, /readyz).
CREATE TABLE store_probe (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  written_at INTEGER NOT NULL
);
-- input_bytes: the size of a job's input in bytes, written by the insert, so the bytes queued
-- on an endpoint are summed from the queue's index without reading the inputs
-- (GANTRY_QUEUE_MAX_INPUT_BYTES). Queued jobs of an older version are measured once here.
ALTER TABLE jobs ADD COLUMN input_bytes INTEGER NOT NULL DEFAULT 0;
UPDATE jobs SET input_bytes = length(CAST(input_json AS BLOB)) WHERE status = 'IN_QUEUE';
DROP INDEX jobs_claim;
CREATE INDEX jobs_claim ON jobs (endpoint_id, queued_at, input_bytes) WHERE status = 'IN_QUEUE';
