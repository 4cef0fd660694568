/**
 * Who may read /metrics (docs/metrics.md): `on` (default) asks for a bearer token — the
 * GANTRY_METRICS_TOKEN, or any admin key; `public` asks for none (a scrape on a private
 * network); `off` serves no /metrics and counts nothing.
 */
export type MetricsAccess = 'on' | 'public' | 'off';

/** The metrics settings (GANTRY_METRICS, GANTRY_METRICS_TOKEN). */
export interface MetricsConfig {
  access: MetricsAccess;
  /** A secret Prometheus sends as `Authorization: Bearer …` (at least 16 characters); null: admin keys only. */
  token: string | null;
}

/** The defaults: /metrics on, for admin keys. */
export const METRICS_DEFAULTS: MetricsConfig = { access: 'on', token: null };

const ACCESS: readonly MetricsAccess[] = ['on', 'public', 'off'];

/**
 * Reads GANTRY_METRICS and GANTRY_METRICS_TOKEN; throws naming the variable on a bad value.
 *
 * @example loadMetricsConfig({ GANTRY_METRICS: 'public' }) // { access: 'public', token: null }
 */
export function loadMetricsConfig(env: NodeJS.ProcessEnv): MetricsConfig {
  const config: MetricsConfig = { ...METRICS_DEFAULTS };
  const access = env.GANTRY_METRICS;
  if (access !== undefined && access !== '') {
    if (!(ACCESS as readonly string[]).includes(access)) throw new Error(`Invalid GANTRY_METRICS=${JSON.stringify(access)}: expected on, public or off`);
    config.access = access as MetricsAccess;
  }
  const token = env.GANTRY_METRICS_TOKEN;
  if (token !== undefined && token !== '') {
    if (token.length < 16) throw new Error('Invalid GANTRY_METRICS_TOKEN: use at least 16 characters');
    config.token = token;
  }
  return config;
}
