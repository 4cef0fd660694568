-- 0007_job_minutes_retention: the reaper deletes per-minute aggregates older than
-- GANTRY_MINUTES_KEEP_DAYS, oldest first, in batches (src/store/minute-store.ts,
-- deleteMinutesBefore); the primary key starts with endpoint_id, so the cutoff needs its own index.
CREATE INDEX job_minutes_minute ON job_minutes (minute);
