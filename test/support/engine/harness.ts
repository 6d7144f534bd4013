import { pino } from 'pino';
import type { LifecycleEvent, ObservedInvocation } from '../../../runtime/src/engine/observer.ts';
import { vi } from 'vitest';
import { Engine, type EngineOptions } from '../../../runtime/src/engine/engine.ts';
import type { AcceptRequest } from '../../../runtime/src/engine/types.ts';
import type { WriteBatch } from '../../../runtime/src/storage/api.ts';
import { MemoryStorage } from '../../../runtime/src/storage/memory/storage.ts';
import type { ServiceDefaults } from '../../../runtime/src/schema/types.ts';
import type { InvocationRow, JournalRow } from '../../../runtime/src/storage/rows.ts';
import { createMetrics } from '../../../runtime/src/telemetry/metrics.ts';
import { SERVICES, StubRegistry, type HandlerName, type ServiceName } from './registry.ts';
import { ScriptedInvoker, type ScriptedAttempt } from './scripted-invoker.ts';

/**
 * One engine over the in-memory store, the stub registry and the scripted invoker: the engine's state machine without
 * PostgreSQL and without an SDK. Every partition is recovered (served) before the test starts.
 */

export const PARTITIONS = 4;

/** MemoryStorage that records every batch submitted, and can hold commits back until the test lets them through. */
export class ObservedStorage extends MemoryStorage {
  readonly batches: WriteBatch[] = [];
  private held: (() => void)[] | undefined;

  override submit(batch: WriteBatch): Promise<void> {
    this.batches.push(batch);
    const held = this.held;
    if (held === undefined) return super.submit(batch);
    return new Promise<void>((resolve, reject) =>
      held.push(() => {
        super.submit(batch).then(resolve, reject);
      }),
    );
  }

  /** Batches submitted from now on wait (uncommitted) until `releaseCommits`. */
  holdCommits(): void {
    this.held ??= [];
  }

  /** Submits the held batches, in submission order. */
  releaseCommits(): void {
    const held = this.held ?? [];
    this.held = undefined;
    for (const go of held) go();
  }

  /** The journal rows of an invocation as committed, in index order. */
  journalOf(id: string): JournalRow[] {
    return [...(this.tables.journal.get(id) ?? [])].sort((a, b) => a.index - b.index);
  }
}

export interface EngineHarness {
  readonly engine: Engine;
  readonly storage: ObservedStorage;
  readonly invoker: ScriptedInvoker;
  readonly registry: StubRegistry;
  /** Every lifecycle event the engine reported (deps.observer), in order. */
  events: { inv: ObservedInvocation; e: LifecycleEvent }[];
  /** The kinds of the events of one invocation, in order. */
  eventsOf(id: string): string[];
  /** Every partition list the engine reported suspect (deps.onSuspect). */
  readonly suspects: number[][];
  /**
   * Recovers the partitions given up after a failure, as the cluster coordinator's next step does: held again (a new
   * epoch) and recovered from storage.
   */
  recoverSuspects(): Promise<void>;
  /** An ingress request for a handler of the fixture. */
  request<S extends ServiceName>(
    service: S,
    handler: HandlerName<S>,
    options?: { key?: string; body?: string; idempotencyKey?: string; delayMs?: number },
  ): AcceptRequest;
  /** The `n`th attempt (from 0) of an invocation, once it started. */
  attempt(id: string, n?: number): Promise<ScriptedAttempt>;
  row(id: string): Promise<InvocationRow | undefined>;
  /** Waits for a row whose columns in `expected` (primitives, compared with ===) have those values. */
  rowMatching(id: string, expected: Partial<InvocationRow>): Promise<InvocationRow>;
  stop(): Promise<void>;
}

export interface HarnessOptions {
  /** Replaces fields of the fixture's default retry policy (10 ms backoff, 3 attempts, then kill). */
  retryPolicy?: Partial<ServiceDefaults['retryPolicy']>;
  engine?: Partial<EngineOptions>;
  /**
   * false: nobody acts on a suspect partition (the engine's reports are only recorded). By default the harness does
   * what the cluster coordinator does: the partition is given up at once and dropped, until `recoverSuspects`.
   */
  coordinator?: boolean;
}

/** How long a test waits for the engine to get somewhere: everything here is in memory. */
const PATIENCE_MS = 5_000;

/** Polls `fn` until it stops throwing (or returns something truthy). */
export function until<T>(fn: () => T | Promise<T>): Promise<T> {
  return vi.waitFor(fn, { timeout: PATIENCE_MS, interval: 5 });
}

export async function startEngine(options: HarnessOptions = {}): Promise<EngineHarness> {
  const storage = new ObservedStorage();
  const invoker = new ScriptedInvoker();
  const registry = new StubRegistry(options.retryPolicy === undefined ? {} : { retryPolicy: options.retryPolicy });
  const suspects: number[][] = [];
  const events: { inv: ObservedInvocation; e: LifecycleEvent }[] = [];
  // What the cluster coordinator does with a suspect partition (cluster/coordinator.ts `suspect`): stop writing it at
  // once (nothing submitted after the failure commits), forget it in memory, recover it later from storage.
  const given = new Set<number>();
  const suspect = (partitions: number[]): void => {
    const held = partitions.filter((p) => storage.epochOf(p) !== undefined);
    if (held.length === 0) return;
    for (const p of held) {
      storage.release(p);
      given.add(p);
    }
    engine.drop(held);
  };
  if (options.coordinator !== false) storage.onSuspect = (partitions) => suspect(partitions);
  const engine: Engine = new Engine(
    { node: 'unit', partitions: PARTITIONS, maxAwaitedFutureDepth: 16, maxProtocolVersion: 6, ...options.engine },
    {
      storage,
      registry: registry.asSchemaRegistry(),
      invoker,
      logger: pino({ level: 'silent' }),
      metrics: createMetrics(),
      observer: { event: (inv, e) => events.push({ inv, e }) },
      onSuspect: (partitions) => {
        suspects.push(partitions);
        if (options.coordinator !== false) suspect(partitions);
      },
    },
  );
  await engine.recover([...Array(PARTITIONS).keys()]);

  const harness: EngineHarness = {
    engine,
    storage,
    invoker,
    registry,
    suspects,
    events,
    eventsOf: (id) => events.filter((x) => x.inv.id === id).map((x) => x.e.kind),
    async recoverSuspects() {
      const partitions = [...given];
      given.clear();
      for (const p of partitions) storage.retake(p);
      await engine.recover(partitions);
    },
    request(service, handler, o = {}) {
      return {
        service: { name: service, ty: SERVICES[service].ty },
        handler: registry.handler(service, handler),
        key: o.key,
        body: Buffer.from(o.body ?? ''),
        headers: [],
        delayMs: o.delayMs,
        idempotencyKey: o.idempotencyKey,
        invokedBy: 'ingress',
      };
    },
    attempt: (id, n = 0) =>
      until(() => {
        const a = invoker.of(id)[n];
        if (a === undefined) throw new Error(`attempt ${n} of ${id} has not started (${invoker.of(id).length} so far)`);
        return a;
      }),
    row: (id) => storage.invocations.get(id),
    rowMatching: (id, expected) =>
      until(async () => {
        const row = await storage.invocations.get(id);
        if (row === undefined) throw new Error(`${id} is not stored`);
        for (const [k, v] of Object.entries(expected)) {
          const actual = (row as unknown as Record<string, unknown>)[k];
          if (actual !== v) throw new Error(`${id}: ${k} is ${String(actual)}, waiting for ${String(v)}`);
        }
        return row;
      }),
    stop: () => engine.stop(),
  };
  return harness;
}
