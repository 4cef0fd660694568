-- The fleet (docs/scaling.md): registry credentials endpoints pull their images with, the
-- allocator's settings per endpoint, and how often a job was preempted.

-- Registry logins saved once and named by endpoints (worker.registryCredentials = id). The
-- password is sealed with the gateway's secret key (security/secret-box.ts), never stored plain.
CREATE TABLE registry_credentials (
  id         TEXT PRIMARY KEY,
  name       TEXT NOT NULL,
  username   TEXT NOT NULL,
  password   TEXT NOT NULL,
  created_at INTEGER NOT NULL
);

-- priority 0-100 (higher first); preemptible 0/1 (running workers may be stopped for a
-- higher priority, their jobs requeued without counting an attempt); flashboot 0/1 (stopped
-- workers kept to start again fast); share_weight 1-100 (fair share among equal priorities).
ALTER TABLE endpoints ADD COLUMN priority INTEGER NOT NULL DEFAULT 50;
ALTER TABLE endpoints ADD COLUMN preemptible INTEGER NOT NULL DEFAULT 0;
ALTER TABLE endpoints ADD COLUMN flashboot INTEGER NOT NULL DEFAULT 0;
ALTER TABLE endpoints ADD COLUMN share_weight INTEGER NOT NULL DEFAULT 1;

-- Times the job was taken back from a worker stopped for a higher-priority endpoint (not an attempt).
ALTER TABLE jobs ADD COLUMN preemptions INTEGER NOT NULL DEFAULT 0;
