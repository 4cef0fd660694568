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
import type { PgConnection } from './connection.js';

const CREATE_ENDPOINT_SQL = `INSERT INTO endpoints (${ENDPOINT_COLUMNS})
  VALUES (${ENDPOINT_COLUMN_NAMES.map((_, i) => `$${i + 1}`).join(', ')}) ON CONFLICT (id) DO NOTHING RETURNING 1`;
/** $1 is the id; the settings follow in ENDPOINT_SETTING_COLUMNS order. */
const UPDATE_ENDPOINT_SQL = `UPDATE endpoints SET ${ENDPOINT_SETTING_COLUMNS.map((column, i) => `${column} = $${i + 2}`).join(', ')}
  WHERE id = $1 RETURNING 1`;

/** The endpoints table on PostgreSQL; deleting an endpoint also deletes its jobs and workers, in one transaction. */
export class PgEndpointStore implements EndpointStore {
  constructor(private readonly db: PgConnection) {}

  async createEndpoint(endpoint: EndpointRecord): Promise<boolean> {
    return (await this.db.query(CREATE_ENDPOINT_SQL, endpointValues(endpoint))).length === 1;
  }

  async getEndpoint(id: string): Promise<EndpointRecord | undefined> {
    const row = (await this.db.query<EndpointRow>('SELECT * FROM endpoints WHERE id = $1', [id]))[0];
    return row === undefined ? undefined : toEndpoint(row);
  }

  async listEndpoints(): Promise<EndpointRecord[]> {
    return (await this.db.query<EndpointRow>('SELECT * FROM endpoints ORDER BY created_at, id')).map(toEndpoint);
  }

  async updateEndpoint(endpoint: EndpointRecord): Promise<boolean> {
    return (await this.db.query(UPDATE_ENDPOINT_SQL, [endpoint.id, ...endpointSettingValues(endpoint)])).length === 1;
  }

  deleteEndpoint(id: string): Promise<boolean> {
    return this.db.transaction(async (client) => {
      if ((await client.query('DELETE FROM endpoints WHERE id = $1', [id])).rowCount === 0) return false;
      await client.query('DELETE FROM jobs WHERE endpoint_id = $1', [id]); // stream chunks go by ON DELETE CASCADE
      await client.query('DELETE FROM workers WHERE endpoint_id = $1', [id]);
      // The charts' minutes too, or an endpoint created later with the same id would show them.
      await client.query('DELETE FROM job_minute_buckets WHERE endpoint_id = $1', [id]);
      await client.query('DELETE FROM job_minutes WHERE endpoint_id = $1', [id]);
      // And its cold starts (docs/scaling.md, "Cold starts").
      await client.query('DELETE FROM cold_start_totals WHERE endpoint_id = $1', [id]);
      await client.query('DELETE FROM cold_start_buckets WHERE endpoint_id = $1', [id]);
      await client.query('DELETE FROM cold_start_recent WHERE endpoint_id = $1', [id]);
      return true;
    });
  }
}
