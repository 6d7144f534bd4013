/** One state entry as the service protocol's StartMessage carries it. */
export interface StateEntry {
  readonly key: Uint8Array;
  readonly value: Uint8Array;
}

/** A committed change to one key's state, applied to the cached copy in commit order. */
export type StateChange =
  | { readonly kind: 'set'; readonly key: Uint8Array; readonly value: Uint8Array }
  | { readonly kind: 'clear'; readonly key: Uint8Array }
  | { readonly kind: 'clearAll' };

/** A key's state larger than this is not kept: such objects pay for a read per attempt, as before. */
const MAX_CACHED_BYTES = 64 * 1024;

/**
 * The committed state of virtual-object keys whose partitions this process owns, so that an exclusive invocation
 * starts without reading its key's state from PostgreSQL (the previous holder just wrote it). Correct only because
 * every write to such a key's state goes through this process's engine while it holds the key's partition:
 *
 * - a committed write is applied here as the first reaction to its commit (`PartitionProcessor.onCommitted`), before
 *   anything that could start another attempt of the key runs; a write that failed or whose outcome is unknown drops
 *   the key (`invalidate`);
 * - a read from PostgreSQL fills the cache only if nothing was applied to or dropped from the key while it ran, so a
 *   read that raced a commit never installs an older state;
 * - changes this process cannot follow entry by entry (admin state replacement) drop the key, and losing any
 *   partition lease drops everything (another process may have written meanwhile).
 *
 * Bounded: at most `maxKeys` keys (least recently used go first), none larger than 64 KiB.
 */
/** A read of one key's state from PostgreSQL, started by `beginRead` and ended by `fill` or `abandon`. */
export interface StateRead {
  readonly lk: string;
  /** Set when the key changed while the read ran: what it found may be older than the cache's truth. */
  stale: boolean;
}

/** One key's cached state: its entries by key bytes (latin1) and their total size. */
interface Cached {
  readonly entries: Map<string, StateEntry>;
  bytes: number;
}

const sizeOf = (e: StateEntry): number => e.key.byteLength + e.value.byteLength;
const keyOf = (key: Uint8Array): string => Buffer.from(key.buffer, key.byteOffset, key.byteLength).toString('latin1');

export class StateCache {
  private readonly entries = new Map<string, Cached>();
  private readonly reads = new Map<string, Set<StateRead>>();

  constructor(private readonly maxKeys: number) {}

  /** The key's cached state in key order, or undefined (then read it between `beginRead` and `fill`). */
  get(lk: string): StateEntry[] | undefined {
    const cached = this.entries.get(lk);
    if (cached === undefined) return undefined;
    // Most recently used last.
    this.entries.delete(lk);
    this.entries.set(lk, cached);
    return [...cached.entries.values()].sort((a, b) => Buffer.compare(a.key, b.key));
  }

  beginRead(lk: string): StateRead {
    const read: StateRead = { lk, stale: false };
    let set = this.reads.get(lk);
    if (set === undefined) this.reads.set(lk, (set = new Set()));
    set.add(read);
    return read;
  }

  /** Installs what the read found, unless the key changed while it ran. */
  fill(read: StateRead, state: readonly StateEntry[]): void {
    this.abandon(read);
    if (read.stale || this.maxKeys <= 0) return;
    let bytes = 0;
    for (const e of state) bytes += sizeOf(e);
    if (bytes > MAX_CACHED_BYTES) return;
    const entries = new Map<string, StateEntry>();
    for (const e of state) entries.set(keyOf(e.key), e);
    this.entries.delete(read.lk);
    this.entries.set(read.lk, { entries, bytes });
    while (this.entries.size > this.maxKeys) this.entries.delete(this.entries.keys().next().value!);
  }

  /** The read failed: it fills nothing. */
  abandon(read: StateRead): void {
    const set = this.reads.get(read.lk);
    if (set === undefined) return;
    set.delete(read);
    if (set.size === 0) this.reads.delete(read.lk);
  }

  /** A committed change (in commit order). */
  apply(lk: string, change: StateChange): void {
    this.changed(lk);
    const cached = this.entries.get(lk);
    if (cached === undefined) return;
    if (change.kind === 'clearAll') {
      cached.entries.clear();
      cached.bytes = 0;
      return;
    }
    const k = keyOf(change.key);
    const old = cached.entries.get(k);
    if (old !== undefined) cached.bytes -= sizeOf(old);
    if (change.kind === 'clear') {
      cached.entries.delete(k);
      return;
    }
    const entry: StateEntry = { key: change.key, value: change.value };
    cached.entries.set(k, entry);
    cached.bytes += sizeOf(entry);
    if (cached.bytes > MAX_CACHED_BYTES) this.entries.delete(lk);
  }

  /** The key's state is unknown now (a failed write, an admin replacement). */
  invalidate(lk: string): void {
    this.changed(lk);
    this.entries.delete(lk);
  }

  /** Forget everything (a partition lease was lost). */
  clear(): void {
    for (const set of this.reads.values()) for (const read of set) read.stale = true;
    this.entries.clear();
  }

  get size(): number {
    return this.entries.size;
  }

  private changed(lk: string): void {
    const set = this.reads.get(lk);
    if (set !== undefined) for (const read of set) read.stale = true;
  }
}
