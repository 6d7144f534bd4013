/** Logging, and stopping everything the harness waits for when a signal comes or a child process dies. */

export function log(message: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Stopped by a signal or by a child process that died: every wait in the harness races against this. */
export class Abort {
  private rejectFn!: (err: Error) => void;
  readonly promise: Promise<never>;
  reason: Error | undefined;
  constructor() {
    this.promise = new Promise<never>((_, reject) => {
      this.rejectFn = reject;
    });
    this.promise.catch(() => undefined); // observed through race(); never an unhandled rejection
  }
  abort(err: Error): void {
    if (this.reason !== undefined) return;
    this.reason = err;
    this.rejectFn(err);
  }
  race<T>(promise: Promise<T>): Promise<T> {
    return Promise.race([promise, this.promise]);
  }
}

export function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = err.cause === undefined ? '' : `\n  caused by: ${describe(err.cause)}`;
  return `${err.message}${cause}`;
}

/** Like Promise.all, but waits for every promise before rejecting, so nothing started is left without its cleanup. */
export async function settleAll<T extends readonly unknown[]>(promises: { [K in keyof T]: Promise<T[K]> }): Promise<T> {
  const settled = await Promise.allSettled(promises);
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed !== undefined) throw failed.reason;
  return settled.map((s) => (s as PromiseFulfilledResult<unknown>).value) as unknown as T;
}
