-- 0020_job_inputs (issue 22, item 3; docs/benchmarks.md "Big bodies"): a job's input in a table
-- of its own. Every transition's RETURNING read the 19 MB input back from TOAST and sent it over
-- the wire, and the gateway decoded it, where no caller showed it. The input is written once, at
-- submit, and read only where it is shown: job-take, /status of a live job, the console's job
-- page, the image feature's billing. Its rows go with their job (ON DELETE CASCADE).
CREATE TABLE job_inputs (
  job_id     TEXT PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
  input_json TEXT NOT NULL
);

INSERT INTO job_inputs (job_id, input_json) SELECT id, input_json FROM jobs;
ALTER TABLE jobs DROP COLUMN input_json;
