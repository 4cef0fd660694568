-- 0022_cold_starts (docs/scaling.md, "Cold starts"): each endpoint's cold starts kept in the
-- store, so a gateway that becomes the leader (a restart, or another gateway taking over on
-- PostgreSQL) reports them as its predecessor did. Bounded: per endpoint and kind one row of
-- counts, one per histogram bucket (15), and a ring of the last 256 durations (`slot` is the
-- count before the cold start, modulo 256). Deleted with their endpoint.

-- Count since the endpoint's first cold start, the histogram's sum, and the latest.
CREATE TABLE cold_start_totals (
  endpoint_id TEXT NOT NULL,
  kind        TEXT NOT NULL,
  count       BIGINT NOT NULL,
  sum_ms      DOUBLE PRECISION NOT NULL,
  last_ms     DOUBLE PRECISION NOT NULL,
  last_at     BIGINT NOT NULL,
  PRIMARY KEY (endpoint_id, kind)
);

-- The histogram (cold-starts.ts COLD_START_BOUNDS; the last bucket is +Inf), a row per bucket used.
CREATE TABLE cold_start_buckets (
  endpoint_id TEXT NOT NULL,
  kind        TEXT NOT NULL,
  bucket      INTEGER NOT NULL,
  count       BIGINT NOT NULL,
  PRIMARY KEY (endpoint_id, kind, bucket)
);

-- The last 256 durations, for p70/p90/p98.
CREATE TABLE cold_start_recent (
  endpoint_id TEXT NOT NULL,
  kind        TEXT NOT NULL,
  slot        INTEGER NOT NULL,
  ms          DOUBLE PRECISION NOT NULL,
  PRIMARY KEY (endpoint_id, kind, slot)
);
