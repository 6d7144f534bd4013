import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { TestProject } from 'vitest/node';
import { startEmbeddedPostgres } from './postgres-server.ts';

/**
 * Runs once per `vitest run`, in the main process: one PostgreSQL for all test files, each of which then creates its
 * own database (`createTestDatabase()`). `RATCHET_TEST_PG_ADMIN_URL` points the run at an existing server instead.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // The web console's assets (dist/console), which the admin listener serves at /ui: built as `npm start` builds them.
  execFileSync(process.execPath, ['scripts/build.mjs', 'console'], {
    cwd: fileURLToPath(new URL('../../', import.meta.url)),
    stdio: 'inherit',
  });
  const external = process.env['RATCHET_TEST_PG_ADMIN_URL'];
  if (external !== undefined && external !== '') {
    project.provide('pgAdminUrl', external);
    return async () => {};
  }
  const postgres = await startEmbeddedPostgres();
  project.provide('pgAdminUrl', postgres.adminUrl);
  return () => postgres.stop();
}
