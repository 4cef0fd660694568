-- 0014_stream_attempt: a job that runs again never splices two runs into one stream
-- (src/store/postgres/jobs.ts, docs/api.md "/stream": "A job that runs again").
-- job_stream.attempt: the hand-out (jobs.attempts) whose run posted the chunk. Readers are told
--   when the chunks they get belong to a later run than those before; a requeue deletes the
--   abandoned run's undelivered chunks. Chunks of an older version take the job's count.
ALTER TABLE job_stream ADD COLUMN attempt integer NOT NULL DEFAULT 0;
UPDATE job_stream SET attempt = jobs.attempts FROM jobs WHERE jobs.id = job_stream.job_id;
