import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'console/test/**/*.test.ts'],
    // One embedded PostgreSQL for the run; each test file creates its own database on it.
    globalSetup: ['test/support/global-setup.ts'],
    // Promise.withResolvers for the Restate SDK on Node 20.
    setupFiles: ['test/support/polyfill.ts'],
    // Child processes, real sockets and signals: forks isolate them better than worker threads.
    pool: 'forks',
    // The machines have 2 cores; more files at once only adds contention to timing-sensitive tests.
    maxWorkers: 2,
    fileParallelism: true,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    teardownTimeout: 30_000,
    // The SDK logs a WARN per endpoint about unsigned requests; keep its errors, and let RESTATE_LOGGING override.
    env: { RESTATE_LOGGING: process.env['RESTATE_LOGGING'] ?? 'ERROR' },
  },
});
