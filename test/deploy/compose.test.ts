// deploy/compose.yaml (issue 26.1): PostgreSQL, two gateways on it with the same keys, nginx in
// front running deploy/nginx.conf with its one upstream made the two gateways, and stop grace
// periods longer than the gateways' drain. (No compose CLI here: the file is read as YAML and its
// nginx command run on the shipped configuration.)
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadConfig, poolStopGraceMs } from '../../src/config/config.js';
import { SHUTDOWN_GRACE_MS } from '../../src/server.js';

const COMPOSE = fileURLToPath(new URL('../../deploy/compose.yaml', import.meta.url));
const NGINX_CONF = fileURLToPath(new URL('../../deploy/nginx.conf', import.meta.url));
const hasYaml = spawnSync('python3', ['-c', 'import yaml']).status === 0;

interface Service {
  image?: string;
  environment?: Record<string, string>;
  stop_grace_period?: string;
  volumes?: string[];
  command?: string[];
  depends_on?: unknown;
}

describe.runIf(hasYaml)('deploy/compose.yaml', () => {
  const compose = JSON.parse(execFileSync('python3', ['-c', 'import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))', COMPOSE], { encoding: 'utf8' })) as { services: Record<string, Service> };

  it('runs two gateways on one PostgreSQL with the same keys, each draining within its stop grace', () => {
    expect(Object.keys(compose.services).sort()).toEqual(['gantry-1', 'gantry-2', 'nginx', 'postgres']);
    const [a, b] = [compose.services['gantry-1']!, compose.services['gantry-2']!];
    expect(a.environment).toEqual(b.environment);
    expect(a.environment!.DATABASE_URL).toMatch(/^postgres:\/\/gantry:.*@postgres:5432\/gantry$/);
    for (const key of ['GANTRY_ADMIN_KEY', 'GANTRY_SECRET_KEY', 'GANTRY_TRUSTED_PROXIES']) expect(a.environment![key], key).toBeTruthy();
    expect(a.volumes).toEqual(['gantry-1:/data']);
    expect(b.volumes).toEqual(['gantry-2:/data']);
    const drainMs = poolStopGraceMs(loadConfig({})) + SHUTDOWN_GRACE_MS;
    for (const gw of [a, b]) expect(Number(/^(\d+)s$/.exec(gw.stop_grace_period ?? '')?.[1]) * 1000).toBeGreaterThan(drainMs);
  });

  it("makes nginx's upstream the two gateways from the shipped configuration", () => {
    const command = compose.services.nginx!.command!;
    // Compose turns $$ into $; the command's sed, run on deploy/nginx.conf as the container would.
    const sed = /^(sed '.*') \/etc\/gantry\/nginx\.conf/.exec(command[2]!.replaceAll('$$', '$'))?.[1];
    expect(sed).toBeDefined();
    const conf = execFileSync('sh', ['-c', `${sed!} "$0"`, NGINX_CONF], { encoding: 'utf8' });
    expect(conf.match(/^\s*server \S+ max_fails=0;$/gm)).toEqual(['    server gantry-1:8080 max_fails=0;', '    server gantry-2:8080 max_fails=0;']);
    expect(conf.replace(/^\s*server gantry-2:8080 max_fails=0;\n/m, '').replace('gantry-1:8080', '127.0.0.1:8080')).toBe(readFileSync(NGINX_CONF, 'utf8'));
  });
});
