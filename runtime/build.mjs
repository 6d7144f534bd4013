// Builds the runtime for production: one ES module bundle of runtime/src (dependencies stay in node_modules) and the
// SQL migrations beside it, in dist/runtime. `npm start` and the container image run it; development and the tests run
// the TypeScript sources through tsx. esbuild bundles in well under a second, so `npm start` builds every time.
import { cp, rm } from 'node:fs/promises';
import { build } from 'esbuild';

const out = new URL('../dist/runtime/', import.meta.url);
await rm(out, { recursive: true, force: true });
await build({
  entryPoints: [new URL('./src/main.ts', import.meta.url).pathname],
  outfile: new URL('main.js', out).pathname,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  // node_modules are loaded as installed (native add-ons, package-relative files); only Ratchet's code is bundled.
  packages: 'external',
  sourcemap: true,
  logLevel: 'warning',
});
// storage/pg/migrate.ts reads `./migrations/` next to its module: next to the bundle once built.
await cp(new URL('./src/storage/pg/migrations/', import.meta.url), new URL('migrations/', out), { recursive: true });
