import { vi } from 'vitest';

/**
 * Tests wait with `vi.waitFor` / `expect.poll`, never with sleeps. This only fixes the defaults used across the
 * suite so a slow CI machine gets the same patience everywhere.
 */

export const WAIT_TIMEOUT_MS = 20_000;
export const WAIT_INTERVAL_MS = 50;

/** `vi.waitFor` with the suite's defaults: retries `fn` until it stops throwing (or returns a truthy value). */
export function waitFor<T>(fn: () => T | Promise<T>, timeoutMs: number = WAIT_TIMEOUT_MS): Promise<T> {
  return vi.waitFor(fn, { timeout: timeoutMs, interval: WAIT_INTERVAL_MS });
}
