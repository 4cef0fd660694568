-- 0009_stream_buffer: a job's stream buffer is bounded in bytes and drained without loss
-- (src/store/postgres/jobs.ts, docs/api.md "/stream").
-- stream_bytes: bytes of the job's chunks buffered and not yet delivered, kept by the append
--   (+) and the delete after delivery (-), so the cap GANTRY_STREAM_BUFFER_BYTES costs one
--   column read per post instead of a sum over the buffer. Not indexed: its updates stay HOT.
-- stream_cut: the hand-out (attempts) whose stream the cap cut: its later chunks are refused
--   too, so readers get a clean prefix and a marker (a chunk '') rather than a stream with a gap.
-- (job_stream.seq is an identity column here: never reused, so no per-job counter is needed.)
ALTER TABLE jobs ADD COLUMN stream_bytes BIGINT NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN stream_cut INTEGER NOT NULL DEFAULT 0;
UPDATE jobs SET stream_bytes = s.bytes
  FROM (SELECT job_id, SUM(octet_length(chunk)) AS bytes FROM job_stream GROUP BY job_id) AS s
  WHERE jobs.id = s.job_id;
