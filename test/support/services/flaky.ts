import * as restate from '@restatedev/restate-sdk';

/**
 * The Flaky service of restate's lab: both handlers always fail with a retryable error, after two attempts 100 ms
 * apart `boom` is paused and `boomKill` killed (handler-level retry policies, as the lab's manifest has them).
 */
export const flaky = restate.service({
  name: 'Flaky',
  handlers: {
    boom: restate.handlers.handler(
      { retryPolicy: { maxAttempts: 2, initialInterval: 100, onMaxAttempts: 'pause' } },
      (_ctx: restate.Context): Promise<never> => Promise.reject(new Error('boom')),
    ),
    boomKill: restate.handlers.handler(
      { retryPolicy: { maxAttempts: 2, initialInterval: 100, onMaxAttempts: 'kill' } },
      (_ctx: restate.Context): Promise<never> => Promise.reject(new Error('boom')),
    ),
  },
});
