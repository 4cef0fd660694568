-- 0019_console_operate (docs/console.md): what the console shows of workers and keys.

-- The worker that ran each metered run: a worker's jobs done, counted where every run that
-- ended is written already (a worker's live count of held jobs is not a history).
ALTER TABLE job_meters ADD COLUMN worker_id TEXT;
CREATE INDEX job_meters_worker ON job_meters (worker_id) WHERE worker_id IS NOT NULL;

-- A key's first characters (a recognisable prefix, not enough to guess it), when it was last
-- used (written at most once a minute per key and gateway), and whether the gateway manages it
-- (a pool worker's own key: revoking it by hand needs force).
ALTER TABLE api_keys ADD COLUMN prefix TEXT;
ALTER TABLE api_keys ADD COLUMN last_used_at INTEGER;
ALTER TABLE api_keys ADD COLUMN managed INTEGER NOT NULL DEFAULT 0;
UPDATE api_keys SET managed = 1 WHERE name LIKE 'worker pool % (autoscaler)%';
