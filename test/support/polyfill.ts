import { fileURLToPath } from 'node:url';

/**
 * `@restatedev/restate-sdk` 1.17.2 calls `Promise.withResolvers` (ES2024, Node >= 22) while handling requests; Node 20
 * lacks it. Loaded as a vitest `setupFiles` entry and with `--import` in every child process that hosts SDK services.
 * It patches only when missing, so it is a no-op on Node 22+.
 */

interface Resolvers<T> {
  promise: Promise<T>;
  resolve: (value: T | PromiseLike<T>) => void;
  reject: (reason?: unknown) => void;
}

function withResolvers<T>(): Resolvers<T> {
  let resolve!: Resolvers<T>['resolve'];
  let reject!: Resolvers<T>['reject'];
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

// Typed through `unknown` rather than a global augmentation: the augmentation would clash with lib.es2024 once the
// tsconfig moves to it.
if (typeof (Promise as unknown as { withResolvers?: unknown }).withResolvers !== 'function') {
  Object.defineProperty(Promise, 'withResolvers', {
    value: withResolvers,
    writable: true,
    configurable: true,
    enumerable: false,
  });
}

/** Absolute path of this module, for `--import` in child processes that host SDK services (tsx must be imported first). */
export const polyfillModulePath: string = fileURLToPath(import.meta.url);
