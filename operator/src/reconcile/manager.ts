import type { Logger } from 'pino';
import type { AdminClientFactory } from '../admin-client/types.ts';
import type { EventRecorder, Kube, ListWatchSource } from '../kube/port.ts';
import type { KubeObject } from '../kube/types.ts';
import { operatorMetrics, type OperatorMetrics } from '../telemetry/metrics.ts';
import { Informer, type InformerHandler } from './informer.ts';
import { WorkQueue, type RateLimitOptions, type ShutdownResult } from './queue.ts';
import {
  keyString,
  type Controller,
  type ObjectKey,
  type ReconcileContext,
  type ServiceUrlResolver,
  type Watch,
} from './types.ts';

/*
 * Runs controllers: one shared informer per watched kind (and namespace), one work queue per controller.
 * Informers run on every replica, so a standby's caches are warm and /readyz means the same everywhere; queues and
 * reconciles run only while this replica leads (`setLeading`). On becoming leader every cached primary is enqueued,
 * since events seen while standing by were dropped.
 */

export type SourceFactory = (apiVersion: string, kind: string, namespace: string | undefined) => ListWatchSource;

export interface ManagerOptions {
  readonly controllers: readonly Controller[];
  readonly kube: Kube;
  readonly events: EventRecorder;
  readonly admin: AdminClientFactory;
  /** Namespace the operator runs in (handed to reconcilers). */
  readonly operatorNamespace: string;
  /** Where informers list and watch (`ClientNodeKube.listWatchSource` in production). */
  readonly sources: SourceFactory;
  /** Namespaces to watch; empty or absent: all. */
  readonly watchNamespaces?: readonly string[];
  /** Default 5 minutes. */
  readonly resyncPeriodMs?: number;
  /** Per controller; default 4. */
  readonly maxConcurrentReconciles?: number;
  /** Default: `defaultServiceUrl(clusterDomain)`. Tests map Services to loopback. */
  readonly serviceUrl?: ServiceUrlResolver;
  readonly clusterDomain?: string;
  readonly log: Logger;
  readonly metrics?: OperatorMetrics;
  readonly now?: () => Date;
  readonly rateLimit?: RateLimitOptions;
  readonly informerBackoff?: { readonly initialMs: number; readonly maxMs: number };
}

/** `${scheme}://${service}.${namespace}.svc.${clusterDomain}:${port}`. */
export function defaultServiceUrl(clusterDomain = 'cluster.local'): ServiceUrlResolver {
  return (namespace, service, port, scheme = 'http') =>
    `${scheme}://${service}.${namespace}.svc.${clusterDomain}:${port}`;
}

/** The cached objects of one kind across the watched namespaces. */
export interface CacheView {
  get(namespace: string | undefined, name: string): KubeObject | undefined;
  list(namespace?: string): KubeObject[];
}

interface Running {
  readonly queues: ReadonlyMap<string, WorkQueue>;
}

export class Manager {
  private readonly informers = new Map<string, Informer[]>();
  private readonly namespaces: readonly (string | undefined)[];
  private readonly metrics: OperatorMetrics;
  private readonly log: Logger;
  private readonly context: Omit<ReconcileContext, 'log'>;
  private running: Running | undefined;
  /** Leadership changes apply one after the other: a new term starts only once the old one has drained. */
  private transition: Promise<void> = Promise.resolve();
  private wantLeading = false;
  private started = false;
  private stopped = false;

  constructor(private readonly options: ManagerOptions) {
    const names = new Set<string>();
    for (const c of options.controllers) {
      if (names.has(c.name)) throw new Error(`two controllers are named ${c.name}`);
      names.add(c.name);
    }
    this.metrics = options.metrics ?? operatorMetrics;
    this.log = options.log;
    const watch = options.watchNamespaces ?? [];
    this.namespaces = watch.length === 0 ? [undefined] : watch;
    this.context = {
      kube: options.kube,
      events: options.events,
      admin: options.admin,
      now: options.now ?? (() => new Date()),
      serviceUrl: options.serviceUrl ?? defaultServiceUrl(options.clusterDomain),
      operatorNamespace: options.operatorNamespace,
    };
    for (const c of options.controllers) {
      this.subscribe(c.apiVersion, c.kind, this.primaryHandler(c));
      for (const w of c.watches) this.subscribe(w.apiVersion, w.kind, this.watchHandler(c, w));
    }
  }

  /** Starts the informers (on every replica, leader or not). */
  start(): void {
    if (this.started) return;
    this.started = true;
    for (const list of this.informers.values()) for (const informer of list) informer.start();
  }

  /** Resolves once every informer has listed once. */
  async synced(): Promise<void> {
    await Promise.all([...this.informers.values()].flat().map((i) => i.synced));
  }

  hasSynced(): boolean {
    return this.unsynced().length === 0;
  }

  /** The informers that have not listed yet (e.g. `v1 Secret`: missing RBAC shows here and in /readyz). */
  unsynced(): string[] {
    return [...this.informers.values()]
      .flat()
      .filter((i) => !i.hasSynced())
      .map((i) => i.description);
  }

  isReconciling(): boolean {
    return this.running !== undefined;
  }

  /** The cached objects of a watched kind. */
  cache(apiVersion: string, kind: string): CacheView {
    const list = this.informers.get(gvk(apiVersion, kind)) ?? [];
    return {
      get: (namespace, name) => {
        for (const i of list) {
          const obj = i.get(namespace, name);
          if (obj !== undefined) return obj;
        }
        return undefined;
      },
      list: (namespace) => list.flatMap((i) => i.list(namespace)),
    };
  }

  /** Leadership changed: start or stop reconciling (in order; a stop drains before a later start begins). */
  setLeading(leading: boolean, drainDeadlineMs = 10_000): void {
    this.wantLeading = leading;
    this.metrics.leader.set(leading ? 1 : 0);
    this.transition = this.transition.then(async () => {
      if (this.stopped) return;
      if (this.wantLeading && this.running === undefined) this.startReconciling();
      else if (!this.wantLeading && this.running !== undefined) await this.stopReconciling(drainDeadlineMs);
    });
  }

  /** Graceful stop: informers first (no new events), then in-flight reconciles drain until the deadline. */
  async stop(drainDeadlineMs: number): Promise<ShutdownResult[]> {
    this.stopped = true;
    for (const list of this.informers.values()) for (const informer of list) informer.stop();
    await this.transition;
    return this.stopReconciling(drainDeadlineMs);
  }

  private startReconciling(): void {
    const queues = new Map<string, WorkQueue>();
    for (const c of this.options.controllers) {
      const queue = new WorkQueue({
        name: c.name,
        concurrency: this.options.maxConcurrentReconciles ?? 4,
        metrics: this.metrics,
        ...(this.options.rateLimit === undefined ? {} : { rateLimit: this.options.rateLimit }),
        process: (key) => this.reconcile(c, key),
        // The one log line of a failed reconcile (a successful one logs in reconcile()).
        onError: (key, err, retryInMs, durationMs) =>
          this.log.warn(
            { controller: c.name, key: keyString(key), result: 'error', durationMs, retryInMs, err },
            'reconcile failed',
          ),
      });
      queues.set(c.name, queue);
    }
    this.running = { queues };
    this.log.info({ controllers: this.options.controllers.map((c) => c.name) }, 'started reconciling');
    // Events that arrived while standing by were dropped: every known primary gets a pass.
    for (const c of this.options.controllers) {
      const queue = queues.get(c.name);
      for (const obj of this.cache(c.apiVersion, c.kind).list()) queue?.add(keyOf(obj));
    }
  }

  private async stopReconciling(deadlineMs: number): Promise<ShutdownResult[]> {
    const running = this.running;
    if (running === undefined) return [];
    this.running = undefined;
    const results = await Promise.all([...running.queues.values()].map((q) => q.shutDown(deadlineMs)));
    const abandoned = results.flatMap((r) => r.inFlight);
    if (abandoned.length > 0) {
      this.log.warn({ inFlight: abandoned }, 'reconciles still running at the drain deadline');
    } else {
      this.log.info('stopped reconciling');
    }
    return results;
  }

  private async reconcile(c: Controller, key: ObjectKey): Promise<{ requeueAfterMs?: number }> {
    const log = this.log.child({ controller: c.name, key: keyString(key) });
    const started = performance.now();
    const elapsed = (): number => (performance.now() - started) / 1000;
    try {
      const result = await c.reconcile(key, { ...this.context, log });
      const seconds = elapsed();
      const outcome = result.requeueAfterMs === undefined ? 'success' : 'requeue_after';
      this.metrics.reconcileTotal.inc({ controller: c.name, result: outcome });
      this.metrics.reconcileTime.observe({ controller: c.name }, seconds);
      log.info(
        {
          result: outcome,
          durationMs: Math.round(seconds * 1000),
          ...(result.requeueAfterMs === undefined ? {} : { requeueAfterMs: result.requeueAfterMs }),
        },
        'reconciled',
      );
      return result;
    } catch (err) {
      const seconds = elapsed();
      this.metrics.reconcileTotal.inc({ controller: c.name, result: 'error' });
      this.metrics.reconcileErrors.inc({ controller: c.name });
      this.metrics.reconcileTime.observe({ controller: c.name }, seconds);
      throw err;
    }
  }

  private enqueue(controller: Controller, key: ObjectKey): void {
    if (!this.watched(key.namespace)) return;
    this.running?.queues.get(controller.name)?.add(key);
  }

  private watched(namespace: string): boolean {
    return this.namespaces.includes(undefined) || this.namespaces.includes(namespace);
  }

  private primaryHandler(c: Controller): InformerHandler {
    return {
      add: (obj) => this.enqueue(c, keyOf(obj)),
      // Status writes (ours included) would otherwise reconcile every object again after each pass.
      update: (oldObj, newObj) => {
        if (!onlyStatusChanged(oldObj, newObj)) this.enqueue(c, keyOf(newObj));
      },
      delete: (obj) => this.enqueue(c, keyOf(obj)),
      resync: (obj) => this.enqueue(c, keyOf(obj)),
    };
  }

  /** Owned and referenced kinds always map: a child's status (a StatefulSet's ready replicas) is what matters there. */
  private watchHandler(c: Controller, w: Watch): InformerHandler {
    const primaries = (): readonly KubeObject[] => this.cache(c.apiVersion, c.kind).list();
    const cached = (apiVersion: string, kind: string): readonly KubeObject[] => this.cache(apiVersion, kind).list();
    const map = (obj: KubeObject): void => {
      if (this.running === undefined) return;
      let keys: ObjectKey[];
      try {
        keys = w.map(obj, primaries, cached);
      } catch (err) {
        this.log.error({ controller: c.name, watch: w.kind, err }, 'watch mapping threw');
        return;
      }
      for (const key of keys) this.enqueue(c, key);
    };
    return {
      add: map,
      // Both: a child that changed owner (or a label a mapping reads) concerns the old and the new primary.
      update: (oldObj, newObj) => {
        map(oldObj);
        map(newObj);
      },
      delete: map,
      // No resync handler: the primaries' own resync already enqueues every primary.
    };
  }

  private subscribe(apiVersion: string, kind: string, handler: InformerHandler): void {
    const id = gvk(apiVersion, kind);
    let list = this.informers.get(id);
    if (list === undefined) {
      list = this.namespaces.map(
        (namespace) =>
          new Informer(this.options.sources(apiVersion, kind, namespace), {
            resyncPeriodMs: this.options.resyncPeriodMs ?? 5 * 60_000,
            log: this.log.child({ informer: `${kind}.${apiVersion}` }),
            ...(this.options.informerBackoff === undefined ? {} : { backoff: this.options.informerBackoff }),
          }),
      );
      this.informers.set(id, list);
    }
    for (const informer of list) informer.subscribe(handler);
  }
}

function gvk(apiVersion: string, kind: string): string {
  return `${apiVersion}/${kind}`;
}

function keyOf(obj: KubeObject): ObjectKey {
  return { namespace: obj.metadata.namespace ?? '', name: obj.metadata.name };
}

/** True when nothing a reconcile reads besides status changed: same generation, labels, annotations, finalizers, deletion. */
export function onlyStatusChanged(oldObj: KubeObject, newObj: KubeObject): boolean {
  const a = oldObj.metadata;
  const b = newObj.metadata;
  return (
    // Without a generation (kinds with no status subresource) a spec change cannot be told apart: never skip.
    a.generation !== undefined &&
    a.generation === b.generation &&
    a.deletionTimestamp === b.deletionTimestamp &&
    sameJson(a.labels ?? {}, b.labels ?? {}) &&
    sameJson(a.annotations ?? {}, b.annotations ?? {}) &&
    sameJson(a.finalizers ?? [], b.finalizers ?? [])
  );
}

function sameJson(a: Record<string, string> | string[], b: Record<string, string> | string[]): boolean {
  if (Array.isArray(a) || Array.isArray(b)) return JSON.stringify(a) === JSON.stringify(b);
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => a[k] === b[k]);
}
