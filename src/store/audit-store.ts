/**
 * The audit log (docs/security.md, "Audit log"): one row per admin change made through the
 * admin API and per console sign-in, with who, when and from where. Rows are appended, read
 * newest first, and deleted after GANTRY_AUDIT_KEEP_DAYS by the leader's reaper. What goes in
 * is decided above the store (security/audit-log.ts): never a secret value.
 */
export interface AuditStore {
  /** Appends one entry; resolves once it is committed. Its id is given by the store (ever larger). */
  appendAudit(entry: AuditEntry): Promise<void>;
  /**
   * Up to `limit` entries that match every filter given, newest (largest id) first: `before`
   * an id (the cursor: entries older than it), `since` <= at < `until`, `action` exact or a
   * prefix when it ends in `.` (`endpoint.`), `actor` the actor's key id, key name or session,
   * `target` the target's id.
   */
  listAudit(query: AuditQuery): Promise<AuditRecord[]>;
  /** Deletes up to `limit` entries with at < `before`, oldest first (the reaper's retention). Returns how many. */
  deleteAuditBefore(args: { before: number; limit: number }): Promise<number>;
}

/** Who made a change: an API key (its id and name), a console session acting with one, or nobody known (a refused sign-in). */
export interface AuditActor {
  kind: 'key' | 'console' | 'anonymous';
  keyId: string | null;
  keyName: string | null;
  /** A console session's reference (a prefix of its digest: never a usable cookie). */
  session: string | null;
}

/** An entry as written. */
export interface AuditEntry {
  /** Epoch ms. */
  at: number;
  /** What was done: `key.create`, `endpoint.update`, `console.sign-in`, … (docs/api.md, "Audit log"). */
  action: string;
  /** `ok`; for sign-ins also `failed` (wrong credentials) and `limited` (refused by the sign-in limits). */
  outcome: 'ok' | 'failed' | 'limited';
  actor: AuditActor;
  /** The client's address (http/client-address.ts). */
  address: string;
  /** What was changed: `{kind: 'endpoint', id: 'echo'}`; null for sign-ins. */
  target: { kind: string; id: string } | null;
  /** The change's details as JSON text: field names, old and new values of the settings that hold no secret. */
  detailJson: string;
}

/** An entry as read: with its id. */
export interface AuditRecord extends AuditEntry {
  id: number;
}

/** The filters of listAudit. */
export interface AuditQuery {
  actor?: string;
  action?: string;
  target?: string;
  since?: number;
  until?: number;
  before?: number;
  limit: number;
}
