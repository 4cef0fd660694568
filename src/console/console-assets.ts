import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** One file of the console bundle, held in memory (the bundle is small). */
export interface ConsoleAsset {
  type: string;
  body: Buffer;
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.map': 'application/json',
};

/**
 * Where `npm run build` puts the bundle (console/build.mjs): `dist/console/`. From the built
 * module (dist/src/console/) that is two folders up; from the sources (tests) it is
 * `dist/console` at the repository root.
 */
export function defaultAssetsDir(): string | undefined {
  const here = fileURLToPath(new URL('.', import.meta.url));
  for (const dir of [join(here, '..', '..', 'console'), join(here, '..', '..', 'dist', 'console')]) {
    if (existsSync(join(dir, 'index.html'))) return dir;
  }
  return undefined;
}

/** Reads the bundle's files by name (flat folder); an empty map when it was not built. */
export function loadAssets(dir: string | undefined): Map<string, ConsoleAsset> {
  const assets = new Map<string, ConsoleAsset>();
  if (dir === undefined || !existsSync(dir)) return assets;
  for (const name of readdirSync(dir)) {
    const type = TYPES[extname(name)];
    if (type) assets.set(name, { type, body: readFileSync(join(dir, name)) });
  }
  return assets;
}
