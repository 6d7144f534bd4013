import type { Frame } from '../protocol/framing.ts';
import type { InvokerError } from './invoker-error.ts';

/**
 * What an attempt hands the engine, in stream order. The invoker classifies frames by message type only; the engine
 * decodes their payloads. An attempt's effects end with at most one terminal effect (`suspended`, `error`, `end`,
 * `failed`); nothing follows it.
 */
export type Effect =
  /** A journal command (to be journaled before anything is acted on). */
  | { kind: 'command'; frame: Frame }
  /** A proposed result of a `ctx.run` block. */
  | { kind: 'proposeRun'; frame: Frame }
  /** What the SDK awaits now (bidi streams). */
  | { kind: 'awaitingOn'; frame: Frame }
  | { kind: 'suspended'; frame: Frame }
  /** The SDK reported an error (ErrorMessage). */
  | { kind: 'error'; frame: Frame }
  | { kind: 'end' }
  /** The attempt ended without a terminal message: transport error, timeout, bad response or bad message type. */
  | { kind: 'failed'; error: InvokerError };

/**
 * A single-consumer queue of effects: the attempt pushes, the engine pulls (`for await`). Closing ends the iteration
 * once what was pushed is consumed; pushes after closing are dropped.
 */
export class EffectQueue implements AsyncIterable<Effect> {
  private readonly items: Effect[] = [];
  private head = 0;
  private closed = false;
  private wake: (() => void) | undefined;

  push(effect: Effect): void {
    if (this.closed) return;
    this.items.push(effect);
    this.signal();
  }

  /** Ends the iteration after what was pushed, or at once (dropping it) with `discard`. */
  close(discard = false): void {
    if (discard) {
      this.items.length = 0;
      this.head = 0;
    }
    if (this.closed) return;
    this.closed = true;
    this.signal();
  }

  private signal(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Effect> {
    for (;;) {
      if (this.head < this.items.length) {
        const effect = this.items[this.head]!;
        this.items[this.head++] = undefined as unknown as Effect;
        if (this.head === this.items.length) {
          this.items.length = 0;
          this.head = 0;
        }
        yield effect;
        continue;
      }
      if (this.closed) return;
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }
}
