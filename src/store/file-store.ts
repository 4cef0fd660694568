/**
 * Files kept in the database: the image endpoints' files where several gateways share the
 * store and no S3 bucket is set (docs/postgres.md, "Files"), so that any gateway serves them at
 * /files and they outlive the gateway that took them. Bounded in bytes (oldest deleted first)
 * and in time (the image URLs' lifetime); read a slice at a time, never whole.
 */
export interface FileStore {
  /**
   * Stores `body` under `key` (replacing a file of that key), then deletes the oldest other
   * files while all files together hold more than `maxBytes`. Returns how many were deleted.
   */
  putFile(args: { key: string; contentType: string; body: Uint8Array; now: number; maxBytes: number }): Promise<{ evicted: number }>;
  /** A file's size, content type and the time it was stored; undefined when there is none. */
  fileInfo(key: string): Promise<StoredFile | undefined>;
  /**
   * Up to `length` bytes of the file from `offset` (fewer at its end); undefined when the file
   * is gone or was replaced since `createdAt` (a reader never splices two versions).
   */
  readFile(args: { key: string; createdAt: number; offset: number; length: number }): Promise<Uint8Array | undefined>;
  /** Deletes up to `limit` files stored before `before`, oldest first. Returns how many. */
  deleteFilesBefore(args: { before: number; limit: number }): Promise<number>;
}

/** What fileInfo returns of a stored file. */
export interface StoredFile {
  size: number;
  contentType: string;
  createdAt: number;
}
