// Builds Ratchet for production: one ES module bundle per program (dependencies stay in node_modules), in dist/:
// dist/runtime/main.js with the SQL migrations beside it, dist/operator/main.js, and the web console's static assets
// in dist/console/ (a browser bundle with its dependencies inside, served by the admin listener at /ui). `npm start` and the container
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
    // storage/pg/migrate.ts reads `./migrations/` next to its module: next to the bundle once built; the console's
    // error pages (admin/console.ts) read `./error-docs/`.
    assets: [
      ['runtime/src/storage/pg/migrations/', 'migrations/'],
      ['runtime/src/errors/docs/', 'error-docs/'],
    ],
  },
  operator: { entry: 'operator/src/main.ts', assets: [] },
  console: {
    entry: 'console/src/main.ts',
    browser: true,
    assets: [
      ['console/src/index.html', 'index.html'],
      ['console/src/styles.css', 'app.css'],
    ],
  },
};

const wanted = process.argv.slice(2);
for (const name of wanted.length === 0 ? Object.keys(programs) : wanted) {
  const program = programs[name];
  if (program === undefined) throw new Error(`unknown program ${name}; expected ${Object.keys(programs).join(', ')}`);
  const out = new URL(`dist/${name}/`, root);
  await rm(out, { recursive: true, force: true });
  await build(
    program.browser === true
      ? {
          // The console: everything in one file, no CDN at run time.
          entryPoints: [new URL(program.entry, root).pathname],
          outfile: new URL('app.js', out).pathname,
          bundle: true,
          platform: 'browser',
          format: 'esm',
          target: ['es2022'],
          minify: true,
          sourcemap: true,
          logLevel: 'warning',
        }
      : {
          entryPoints: [new URL(program.entry, root).pathname],
          outfile: new URL('main.js', out).pathname,
          bundle: true,
          platform: 'node',
          format: 'esm',
          target: 'node20',
          // node_modules are loaded as installed (native add-ons, package-relative files); only Ratchet's code is
          // bundled.
          packages: 'external',
          sourcemap: true,
          logLevel: 'warning',
        },
  );
  for (const [from, to] of program.assets) await cp(new URL(from, root), new URL(to, out), { recursive: true });
}
