// Builds Ratchet for production: one ES module bundle per program (dependencies stay in node_modules), in dist/:
// dist/runtime/main.js with the SQL migrations beside it, and dist/operator/main.js. `npm start` and the container
// images run them; development (`npm run dev`) and the tests run the TypeScript sources through tsx. esbuild bundles
// both in well under a second, so `npm start` builds every time.
//
//   node scripts/build.mjs              both
//   node scripts/build.mjs runtime      one of them
import { cp, rm } from 'node:fs/promises';
import { build } from 'esbuild';

const root = new URL('../', import.meta.url);

const programs = {
  runtime: {
    entry: 'runtime/src/main.ts',
    // storage/pg/migrate.ts reads `./migrations/` next to its module: next to the bundle once built.
    assets: [['runtime/src/storage/pg/migrations/', 'migrations/']],
  },
  operator: { entry: 'operator/src/main.ts', assets: [] },
};

const wanted = process.argv.slice(2);
for (const name of wanted.length === 0 ? Object.keys(programs) : wanted) {
  const program = programs[name];
  if (program === undefined) throw new Error(`unknown program ${name}; expected ${Object.keys(programs).join(', ')}`);
  const out = new URL(`dist/${name}/`, root);
  await rm(out, { recursive: true, force: true });
  await build({
    entryPoints: [new URL(program.entry, root).pathname],
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
  for (const [from, to] of program.assets) await cp(new URL(from, root), new URL(to, out), { recursive: true });
}
