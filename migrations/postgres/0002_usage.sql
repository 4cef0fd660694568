-- 0002_usage: one row per completed job of a billed (public image) endpoint. Kept apart from
-- jobs, which are deleted after their retention; usage is kept. Money is an integer count of
-- 1e-10 USD (cost_units) and size an integer pixel count, so sums are exact (SUM of BIGINT is
-- NUMERIC in PostgreSQL; the store reads it as text into a BigInt).
CREATE TABLE usage_records (
  job_id      TEXT PRIMARY KEY,
  key_id      TEXT,
  endpoint_id TEXT NOT NULL,
  pixels      BIGINT NOT NULL,
  cost_units  BIGINT NOT NULL,
  created_at  BIGINT NOT NULL
);

-- sumUsage: a time range, grouped by key or endpoint.
CREATE INDEX usage_records_created ON usage_records (created_at);
