import { readFileSync } from 'node:fs';

let cached: string | undefined;

/**
 * The version of the installed gantry package (its package.json), for `gantry --version` and
 * the gantry_build_info metric; '0.0.0' when no package.json is found.
 *
 * @example packageVersion() // '0.1.0'
 */
export function packageVersion(): string {
  if (cached !== undefined) return cached;
  // dist/src/util/*.js and src/util/*.ts sit at different depths below package.json.
  for (const relative of ['../../../package.json', '../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(relative, import.meta.url), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'gantry' && typeof pkg.version === 'string') return (cached = pkg.version);
    } catch {
      // not at this depth
    }
  }
  return (cached = '0.0.0');
}
