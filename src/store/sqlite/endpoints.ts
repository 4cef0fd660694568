import type { EndpointRecord } from '../../model/records.js';
import {
  ENDPOINT_COLUMN_NAMES,
  ENDPOINT_COLUMNS,
  ENDPOINT_SETTING_COLUMNS,
  endpointSettingValues,
  endpointValues,
  toEndpoint,
  type EndpointRow,
} from '../endpoint-rows.js';
import type { EndpointStore } from '../store.js';
import { placeholders, type SqliteConnection } from './connection.js';

const CREATE_ENDPOINT_SQL = `INSERT INTO endpoints (${ENDPOINT_COLUMNS}) VALUES (${placeholders(ENDPOINT_COLUMN_NAMES.length)})
  ON CONFLICT (id) DO NOTHING`;
/** The settings in ENDPOINT_SETTING_COLUMNS order, then the id. */
const UPDATE_ENDPOINT_SQL = `UPDATE endpoints SET ${ENDPOINT_SETTING_COLUMNS.map((column) => `${column} = ?`).join(', ')} WHERE id = ?`;

/** The endpoints table on SQLite; deleting an endpoint also deletes its jobs and workers. */
export class SqliteEndpointStore implements EndpointStore {
  constructor(private readonly c: SqliteConnection) {}

  createEndpoint(endpoint: EndpointRecord): Promise<boolean> {
    return this.c.write(() => this.c.q(CREATE_ENDPOINT_SQL).run(...endpointValues(endpoint)).changes === 1);
  }

  getEndpoint(id: string): Promise<EndpointRecord | undefined> {
    return this.c.read(() => {
      const row = this.c.q('SELECT * FROM endpoints WHERE id = ?').get(id) as EndpointRow | undefined;
      return row === undefined ? undefined : toEndpoint(row);
    });
  }

  listEndpoints(): Promise<EndpointRecord[]> {
    return this.c.read(() => (this.c.q('SELECT * FROM endpoints ORDER BY created_at, id').all() as EndpointRow[]).map(toEndpoint));
  }

  updateEndpoint(endpoint: EndpointRecord): Promise<boolean> {
    return this.c.write(() => this.c.q(UPDATE_ENDPOINT_SQL).run(...endpointSettingValues(endpoint), endpoint.id).changes === 1);
  }

  deleteEndpoint(id: string): Promise<boolean> {
    return this.c.write(
      this.c.db.transaction(() => {
        if (this.c.q('DELETE FROM endpoints WHERE id = ?').run(id).changes === 0) return false;
        this.c.q('DELETE FROM jobs WHERE endpoint_id = ?').run(id); // stream chunks go by ON DELETE CASCADE
        this.c.q('DELETE FROM workers WHERE endpoint_id = ?').run(id);
        // The charts' minutes too, or an endpoint created later with the same id would show them.
        this.c.q('DELETE FROM job_minute_buckets WHERE endpoint_id = ?').run(id);
        this.c.q('DELETE FROM job_minutes WHERE endpoint_id = ?').run(id);
        // And its cold starts (docs/scaling.md, "Cold starts").
        this.c.q('DELETE FROM cold_start_totals WHERE endpoint_id = ?').run(id);
        this.c.q('DELETE FROM cold_start_buckets WHERE endpoint_id = ?').run(id);
        this.c.q('DELETE FROM cold_start_recent WHERE endpoint_id = ?').run(id);
        return true;
      }),
    );
  }
}
