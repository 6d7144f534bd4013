// Type-checked lint for the whole repository. Formatting is Prettier's job: no stylistic rules here.
import { defineConfig, globalIgnores } from 'eslint/config';
import importPlugin from 'eslint-plugin-import';
import tseslint from 'typescript-eslint';

// Import boundaries of the runtime (STYLE.md): only storage/pg talks to PostgreSQL, only the listeners speak HTTP.
const POSTGRES = {
  paths: [
    {
      name: 'pg',
      message: 'Only runtime/src/storage/pg talks to PostgreSQL: go through storage/ (api.ts, pg/tables).',
    },
    { name: 'pg-protocol', message: 'Only runtime/src/storage/pg talks to PostgreSQL.' },
  ],
  patterns: [],
};
const HTTP = {
  paths: [
    {
      name: 'fastify',
      message:
        'Only the listeners (ingress, admin, introspection, observability/listener, probes) and cluster/forward.ts import fastify.',
    },
  ],
  patterns: [{ group: ['@fastify/*'], message: 'Only the listeners import fastify and its plugins.' }],
};
const ENGINE = {
  paths: [],
  patterns: [
    {
      group: ['**/storage/pg/**', '**/storage/memory/**'],
      message: 'The engine reads and writes through storage/api.ts (the Storage interface), never a backend.',
    },
    {
      group: ['**/service-client/**', '**/invoker/attempt.ts'],
      message: 'The engine starts attempts through the invoker (invoker/invoker.ts) and reads their effects.',
    },
  ],
};
const INVOKER = {
  paths: [],
  patterns: [{ group: ['**/engine/**', '**/storage/**'], message: 'The invoker never imports the engine or storage.' }],
};
const STORAGE_CONTRACT = {
  paths: [],
  patterns: [{ group: ['**/storage/pg/**', './pg/**'], message: 'The storage contract is independent of PostgreSQL.' }],
};
/** `no-restricted-imports` forbidding the given groups (a later block replaces the setting of an earlier one). */
function forbid(...groups) {
  return ['error', { paths: groups.flatMap((g) => g.paths), patterns: groups.flatMap((g) => g.patterns) }];
}

export default defineConfig([
  globalIgnores(['node_modules/', 'coverage/', '.ratchet/', '.test-data/', 'charts/', 'crds/']),
  {
    files: ['**/*.ts'],
    extends: [tseslint.configs.recommendedTypeChecked],
    languageOptions: {
      parserOptions: {
        projectService: true,
        tsconfigRootDir: import.meta.dirname,
      },
    },
    plugins: { import: importPlugin },
    settings: {
      // Imports carry explicit `.ts` extensions, so plain Node resolution finds the files.
      'import/resolver': { node: { extensions: ['.ts', '.js', '.mjs'] } },
      'import/extensions': ['.ts', '.js', '.mjs'],
      'import/parsers': { '@typescript-eslint/parser': ['.ts'] },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': 'error',
      '@typescript-eslint/consistent-type-imports': [
        'error',
        { prefer: 'type-imports', fixStyle: 'inline-type-imports' },
      ],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'import/no-cycle': 'error',
    },
  },
  {
    // SDK handlers in tests are async by contract even when they await nothing.
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: { '@typescript-eslint/require-await': 'off' },
  },
  {
    // The runtime and the operator log through pino only.
    files: ['runtime/src/**/*.ts', 'operator/src/**/*.ts'],
    rules: { 'no-console': 'error' },
  },
  {
    files: ['runtime/src/**/*.ts'],
    rules: { 'no-restricted-imports': forbid(POSTGRES, HTTP) },
  },
  {
    files: ['runtime/src/storage/pg/**/*.ts'],
    rules: { 'no-restricted-imports': forbid(HTTP) },
  },
  {
    files: [
      'runtime/src/ingress/**/*.ts',
      'runtime/src/admin/**/*.ts',
      'runtime/src/probes/**/*.ts',
      'runtime/src/listeners/**/*.ts',
      'runtime/src/observability/listener/**/*.ts',
    ],
    rules: { 'no-restricted-imports': forbid(POSTGRES) },
  },
  {
    // Forwarding a request to the node that owns its partition proxies the listener's own fastify request.
    files: ['runtime/src/cluster/forward.ts'],
    rules: { 'no-restricted-imports': forbid(POSTGRES) },
  },
  {
    // A listener, and a PostgreSQL client by nature: it runs the user's SQL on PostgreSQL itself (introspection
    // views, a read-only role, the pgwire proxy), so it holds its own pg pool.
    files: ['runtime/src/introspection/**/*.ts'],
    rules: { 'no-restricted-imports': 'off' },
  },
  {
    // The engine reaches storage only through storage/api.ts and deployments only through the invoker's interface.
    files: ['runtime/src/engine/**/*.ts'],
    rules: { 'no-restricted-imports': forbid(POSTGRES, HTTP, ENGINE) },
  },
  {
    // The invoker runs attempts and hands their effects to whoever reads them: it knows neither engine nor storage.
    files: ['runtime/src/invoker/**/*.ts'],
    rules: { 'no-restricted-imports': forbid(POSTGRES, HTTP, INVOKER) },
  },
  {
    // The storage contract (api.ts, rows.ts) and the in-memory store know nothing of PostgreSQL.
    files: ['runtime/src/storage/*.ts', 'runtime/src/storage/memory/**/*.ts'],
    rules: { 'no-restricted-imports': forbid(POSTGRES, HTTP, STORAGE_CONTRACT) },
  },
  {
    // The operator takes nothing from the runtime but the admin API's types.
    files: ['operator/**/*.ts'],
    rules: {
      'import/no-restricted-paths': [
        'error',
        {
          basePath: import.meta.dirname,
          zones: [
            {
              target: './operator',
              from: './runtime',
              except: ['./src/admin/model'],
              message: 'The operator may import only runtime/src/admin/model (the admin API types) from the runtime.',
            },
          ],
        },
      ],
    },
  },
]);
