-- 0013_fair_dispatch: keys take turns on an endpoint's queue (docs/scaling.md, "Dispatch order").
-- fair_at: the job's place in its endpoint's queue, set by the insert (and by a retry): one
-- past the key's newest queued job, or, for a key with nothing queued, the queue's head (the
-- smallest fair_at queued; the job's queued_at when the queue is empty). Claims take the
-- smallest fair_at first (ties in insertion order), so a key's jobs stay FIFO and keys
-- alternate. Jobs queued by an older version keep their queued_at as their place.
ALTER TABLE jobs ADD COLUMN fair_at BIGINT NOT NULL DEFAULT 0;
UPDATE jobs SET fair_at = queued_at;
DROP INDEX jobs_claim;
CREATE INDEX jobs_claim ON jobs (endpoint_id, fair_at, seq) INCLUDE (input_bytes) WHERE status = 'IN_QUEUE';
-- A key's newest queued job, read by each insert.
CREATE INDEX jobs_fair ON jobs (endpoint_id, COALESCE(key_id, ''), fair_at) WHERE status = 'IN_QUEUE';
