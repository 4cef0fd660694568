-- 0009_stream_buffer: a job's stream buffer is bounded in bytes and drained without loss
-- (src/store/sqlite/jobs.ts, docs/api.md "/stream").
-- stream_bytes: bytes of the job's chunks buffered and not yet delivered, kept by the append
--   (+) and the delete after delivery (-), so the cap GANTRY_STREAM_BUFFER_BYTES costs one
--   column read per post instead of a sum over the buffer.
-- stream_seq: the last seq given to a chunk of the job; seqs are never reused, so a reader
--   deletes exactly the chunks it delivered (by seq) even after others were appended.
-- stream_cut: the hand-out (attempts) whose stream the cap cut: its later chunks are refused
--   too, so readers get a clean prefix and a marker (a chunk '') rather than a stream with a gap.
ALTER TABLE jobs ADD COLUMN stream_bytes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN stream_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN stream_cut INTEGER NOT NULL DEFAULT 0;
UPDATE jobs SET
  stream_bytes = (SELECT COALESCE(SUM(octet_length(chunk)), 0) FROM job_stream WHERE job_id = jobs.id),
  stream_seq = (SELECT COALESCE(MAX(seq), 0) FROM job_stream WHERE job_id = jobs.id)
WHERE id IN (SELECT job_id FROM job_stream);
