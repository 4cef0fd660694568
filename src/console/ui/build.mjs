// Bundles the console (src/console/ui) into dist/console at `npm run build`: one ES module
// with Preact, htm and uPlot inside, its CSS, and index.html. No CDN, nothing fetched at run time.
import { build } from 'esbuild';
import { copyFileSync, mkdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, '..', '..', '..', 'dist', 'console');
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
await build({
  entryPoints: { app: join(here, 'main.js') },
  bundle: true,
  format: 'esm',
  target: ['es2020', 'chrome100', 'firefox100', 'safari15'],
  minify: true,
  legalComments: 'linked',
  outdir: out,
  logLevel: 'warning',
});
await build({ entryPoints: { app: join(here, 'app.css') }, bundle: true, minify: true, outdir: out, logLevel: 'warning' });
for (const name of ['index.html', 'favicon.svg']) copyFileSync(join(here, name), join(out, name));
