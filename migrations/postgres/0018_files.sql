-- 0020_files: the image endpoints' files kept in the database (src/store/postgres/files.ts,
-- docs/postgres.md "Files"). Used where several gateways share the store and no S3 bucket is
-- set: any gateway serves a file at /files and it outlives the gateway that took it.
-- size: bytes of body; created_at: when it was stored (epoch ms), what retention and the
-- byte bound (oldest first) go by. body is stored out of line and uncompressed (EXTERNAL;
-- images are compressed already), so a slice of it reads only the chunks it covers.
CREATE TABLE files (
  key text PRIMARY KEY,
  content_type text NOT NULL,
  size bigint NOT NULL,
  created_at bigint NOT NULL,
  body bytea NOT NULL
);
ALTER TABLE files ALTER COLUMN body SET STORAGE EXTERNAL;
CREATE INDEX files_created ON files (created_at);
