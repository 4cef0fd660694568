-- 0021_log_bytes: each worker log line's size in bytes (UTF-8), so that the reaper bounds an
-- endpoint's logs in bytes as well as lines (GANTRY_LOG_MAX_BYTES_PER_ENDPOINT,
-- src/store/log-store.ts). Lines stored before it are measured once here. The endpoint index
-- carries the size, so summing an endpoint's newest lines can read the index alone.
ALTER TABLE worker_logs ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;
UPDATE worker_logs SET bytes = octet_length(line);
CREATE INDEX worker_logs_endpoint_bytes ON worker_logs (endpoint_id, id) INCLUDE (bytes);
DROP INDEX worker_logs_endpoint;
