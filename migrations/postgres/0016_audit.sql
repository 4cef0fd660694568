-- 0016_audit (docs/security.md, "Audit log"): who changed what through the admin API, and every
-- console sign-in, kept GANTRY_AUDIT_KEEP_DAYS (the leader's reaper deletes older entries in
-- batches). No secret is ever written here: changed fields are named, their secret values never.
-- The id orders the entries (newest first) and is the cursor of GET /admin/v1/audit.
CREATE TABLE audit_entries (
  id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at           BIGINT NOT NULL,
  action       TEXT NOT NULL,
  outcome      TEXT NOT NULL,
  actor_kind   TEXT NOT NULL,
  actor_key_id TEXT,
  actor_name   TEXT,
  session      TEXT,
  address      TEXT NOT NULL,
  target_kind  TEXT,
  target_id    TEXT,
  detail       TEXT NOT NULL
);
-- The retention cutoff and the since/until filters.
CREATE INDEX audit_entries_at ON audit_entries (at);
