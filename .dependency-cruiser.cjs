/**
 * The import rules of src/ (docs/architecture.md): every module imports only from its own layer
 * or the layers below it, and no module imports itself back through a circle. `npm run lint`
 * runs this check; a violation fails the build.
 *
 * Layers, bottom to top. A folder (or file) listed here may import from the ones before it.
 */
const LAYERS = [
  ['model', '^src/(model|util)/'],
  ['config', '^src/config/'],
  ['store', '^src/store/'],
  ['dispatch', '^src/dispatch/'],
  ['security', '^src/security/'],
  ['jobs', '^src/jobs/'],
  ['pool', '^src/pool/'],
  ['services', '^src/services/'],
  ['http', '^src/http/'],
  ['features', '^src/(images|openai|metrics|console|tracing)/'],
  ['composition', '^src/(gateway|server)\\.ts$'],
  ['cli', '^src/cli/'],
];

const upward = LAYERS.slice(0, -1).map(([name, path], i) => ({
  name: `no-upward-from-${name}`,
  comment: `${name} may import only from ${LAYERS.slice(0, i + 1).map(([n]) => n).join(', ')} (and the worker SDK is on its own)`,
  severity: 'error',
  from: { path },
  to: { path: LAYERS.slice(i + 1).map(([, p]) => p) },
}));

module.exports = {
  forbidden: [
    ...upward,
    {
      name: 'no-circular',
      comment: 'A circle of imports: one of its files belongs elsewhere.',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'sdk-stands-alone',
      comment: 'The worker SDK (src/sdk) is what other projects import: it depends on nothing else in src/.',
      severity: 'error',
      from: { path: '^src/sdk/' },
      to: { path: '^src/', pathNot: '^src/sdk/' },
    },
    {
      name: 'only-the-sdk-from-below',
      comment: 'Only features and the CLI use the worker SDK; the gateway core does not.',
      severity: 'error',
      from: { path: '^src/(model|util|config|store|dispatch|security|jobs|pool|services|http)/' },
      to: { path: '^src/sdk/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsConfig: { fileName: 'tsconfig.build.json' },
    tsPreCompilationDeps: true,
    enhancedResolveOptions: { extensions: ['.ts', '.js'] },
  },
};
