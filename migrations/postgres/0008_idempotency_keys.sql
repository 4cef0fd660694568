-- 0008_idempotency_keys: the PostgreSQL twin of migrations/sqlite/0008_idempotency_keys.sql.
-- A job submitted with an Idempotency-Key header carries the key, as a SHA-256 digest of
-- (API key id, endpoint, key), and a digest of the request that made it. The unique index is
-- what makes two gateways submitting the same key at once create one job (INSERT … ON
-- CONFLICT DO NOTHING). Adding nullable columns rewrites no rows; the index holds only jobs
-- with a key.
ALTER TABLE jobs ADD COLUMN idempotency_key TEXT;
ALTER TABLE jobs ADD COLUMN request_digest TEXT;
CREATE UNIQUE INDEX jobs_idempotency_key ON jobs (idempotency_key) WHERE idempotency_key IS NOT NULL;
