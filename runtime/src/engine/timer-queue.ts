/** Node timers cannot wait longer than this; longer delays are re-armed in steps. */
const MAX_DELAY = 2_147_483_647;

/**
 * In-memory schedule of the durable timers of owned partitions. The rows in storage are the truth; this only decides
 * when to look at them. A fired timer's row is deleted in the same transaction as its effect.
 */
export class TimerQueue<T> {
  private readonly handles = new Map<T, NodeJS.Timeout>();

  constructor(private readonly fire: (t: T) => Promise<void>) {}

  schedule(t: T, atMs: number): void {
    const delay = Math.max(0, atMs - Date.now());
    const handle = setTimeout(
      () => {
        this.handles.delete(t);
        if (delay > MAX_DELAY) this.schedule(t, atMs);
        else void this.fire(t);
      },
      Math.min(delay, MAX_DELAY),
    );
    this.handles.set(t, handle);
  }

  /** Disarms the timers matching `pred` and returns them. */
  removeWhere(pred: (t: T) => boolean): T[] {
    const removed: T[] = [];
    for (const [t, h] of this.handles) {
      if (pred(t)) {
        clearTimeout(h);
        this.handles.delete(t);
        removed.push(t);
      }
    }
    return removed;
  }

  clear(): void {
    for (const h of this.handles.values()) clearTimeout(h);
    this.handles.clear();
  }
}
