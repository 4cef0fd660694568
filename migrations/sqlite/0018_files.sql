-- 0020_files: the image endpoints' files kept in the database (src/store/sqlite/files.ts,
-- docs/postgres.md "Files"). Used where several gateways share the store and no S3 bucket is
-- set: any gateway serves a file at /files and it outlives the gateway that took it. A lone
-- gateway on SQLite keeps its files in <data dir>/files instead; the table is here so both
-- backends keep one schema and one conformance suite.
-- size: bytes of body; created_at: when it was stored (epoch ms), what retention and the
-- byte bound (oldest first) go by.
CREATE TABLE files (
  key TEXT PRIMARY KEY,
  content_type TEXT NOT NULL,
  size INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  body BLOB NOT NULL
);
CREATE INDEX files_created ON files (created_at);
