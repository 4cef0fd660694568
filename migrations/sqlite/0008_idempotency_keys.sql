-- 0008_idempotency_keys: a job submitted with an Idempotency-Key header carries the key, as a
-- SHA-256 digest of (API key id, endpoint, key), and a digest of the request that made it
-- (docs/api.md, Idempotency-Key). The key lives and dies with the job row: a retry within the
-- job's retention finds it; once the job is deleted the key is free again. Jobs without a key
-- leave both NULL and are not in the index.
ALTER TABLE jobs ADD COLUMN idempotency_key TEXT;
ALTER TABLE jobs ADD COLUMN request_digest TEXT;
CREATE UNIQUE INDEX jobs_idempotency_key ON jobs (idempotency_key) WHERE idempotency_key IS NOT NULL;
