import { randomBytes } from 'node:crypto';
import http, { STATUS_CODES, type IncomingMessage } from 'node:http';
import https from 'node:https';
import { ApiException, type KubeConfig, Watch } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { silentLogger } from '../telemetry/logger.ts';
import { microTime } from './micro-time.ts';
import {
  KubeApiError,
  type ApplyOptions,
  type EventRecorder,
  type EventType,
  type Kube,
  type ListOptions,
  type ListResult,
  type ListWatchSource,
  type WatchHandle,
} from './port.ts';
import type { KubeObject, ObjectRef } from './types.ts';

/*
 * The production `Kube` over @kubernetes/client-node 1.4.0. Requests are made directly (node:http/https with the
 * agent and headers `KubeConfig.applyToHTTPSOptions` prepares: certificates, bearer tokens, exec plugins, proxies)
 * rather than through the generated clients or `KubernetesObjectApi`, because those pass responses through
 * `ObjectSerializer`, which turns timestamps into `Date`s and drops MicroTime precision; reconcilers must see the
 * server's JSON exactly. Watches use client-node's own `Watch` (its responses are parsed JSON, not deserialized).
 *
 * Kinds are resolved to resources through discovery (`/api/v1`, `/apis/<group>/<version>`), cached per apiVersion and
 * looked up again on a miss, since a CRD may be installed after the operator starts.
 */

export interface ClientNodeKubeOptions {
  /** Deadline for one non-watch request. */
  readonly requestTimeoutMs?: number;
  /** Watches end (server side) after a random period between 5 and 10 minutes, like client-go's reflector. */
  readonly watchTimeoutSeconds?: () => number;
}

interface ResourceInfo {
  readonly plural: string;
  readonly namespaced: boolean;
}

interface Response {
  readonly status: number;
  readonly body: unknown;
}

const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;
const LIST_PAGE_SIZE = 500;

export class ClientNodeKube implements Kube {
  private readonly discovery = new Map<string, Promise<Map<string, ResourceInfo>>>();
  private readonly requestTimeoutMs: number;
  private readonly watchTimeoutSeconds: () => number;
  private agent: { readonly agent: http.Agent; readonly tls: string } | undefined;

  constructor(
    readonly kubeConfig: KubeConfig,
    options: ClientNodeKubeOptions = {},
  ) {
    this.requestTimeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.watchTimeoutSeconds = options.watchTimeoutSeconds ?? (() => 300 + Math.floor(Math.random() * 300));
  }

  async get<T extends KubeObject = KubeObject>(ref: ObjectRef): Promise<T | undefined> {
    const path = await this.objectPath(ref);
    const res = await this.request('GET', path, {}, undefined, undefined, [404]);
    return res.status === 404 ? undefined : withTypeMeta<T>(res.body, ref.apiVersion, ref.kind);
  }

  async list<T extends KubeObject = KubeObject>(
    apiVersion: string,
    kind: string,
    options: ListOptions = {},
  ): Promise<T[]> {
    const { items } = await this.listPaged(apiVersion, kind, options.namespace, options.labelSelector);
    return items as T[];
  }

  async apply<T extends KubeObject = KubeObject>(obj: KubeObject, options: ApplyOptions): Promise<T> {
    return this.serverSideApply<T>(obj, options, '');
  }

  async applyStatus<T extends KubeObject = KubeObject>(obj: KubeObject, options: ApplyOptions): Promise<T> {
    return this.serverSideApply<T>(obj, options, '/status');
  }

  async setFinalizers<T extends KubeObject = KubeObject>(
    ref: ObjectRef,
    finalizers: string[],
    resourceVersion: string,
  ): Promise<T | undefined> {
    const path = await this.objectPath(ref);
    // resourceVersion in a merge patch is a precondition: the server answers 409 when the object changed since.
    const body = { metadata: { finalizers, resourceVersion } };
    const res = await this.request('PATCH', path, {}, body, 'application/merge-patch+json', [404]);
    if (res.status === 404) return undefined;
    const obj = withTypeMeta<T>(res.body, ref.apiVersion, ref.kind);
    // The API server deletes an object whose deletion was requested as soon as its last finalizer goes.
    const gone = obj.metadata.deletionTimestamp !== undefined && (obj.metadata.finalizers ?? []).length === 0;
    return gone ? undefined : obj;
  }

  async delete(
    ref: ObjectRef,
    options: { propagationPolicy?: 'Background' | 'Foreground' | 'Orphan' } = {},
  ): Promise<boolean> {
    const path = await this.objectPath(ref);
    const body =
      options.propagationPolicy === undefined
        ? undefined
        : { apiVersion: 'v1', kind: 'DeleteOptions', propagationPolicy: options.propagationPolicy };
    const res = await this.request('DELETE', path, {}, body, 'application/json', [404]);
    return res.status !== 404;
  }

  /** POST: creates `obj`; KubeApiError 409 (AlreadyExists) when it exists. */
  async create<T extends KubeObject = KubeObject>(obj: KubeObject): Promise<T> {
    const ref = refOf(obj);
    const path = await this.collectionPath(ref.apiVersion, ref.kind, ref.namespace ?? 'default');
    const res = await this.request('POST', path, {}, obj, 'application/json');
    return withTypeMeta<T>(res.body, ref.apiVersion, ref.kind);
  }

  /** PUT: replaces `obj`, guarded by its metadata.resourceVersion (KubeApiError 409 when stale). */
  async replace<T extends KubeObject = KubeObject>(obj: KubeObject): Promise<T> {
    const ref = refOf(obj);
    const res = await this.request('PUT', await this.objectPath(ref), {}, obj, 'application/json');
    return withTypeMeta<T>(res.body, ref.apiVersion, ref.kind);
  }

  /** JSON merge patch of one object. */
  async mergePatch<T extends KubeObject = KubeObject>(ref: ObjectRef, patch: Record<string, unknown>): Promise<T> {
    const res = await this.request('PATCH', await this.objectPath(ref), {}, patch, 'application/merge-patch+json');
    return withTypeMeta<T>(res.body, ref.apiVersion, ref.kind);
  }

  /** A list+watch source for an informer: all namespaces when `namespace` is undefined. */
  listWatchSource(apiVersion: string, kind: string, namespace?: string, labelSelector?: string): ListWatchSource {
    const watcher = new Watch(this.kubeConfig);
    return {
      description: `${apiVersion} ${kind}${namespace === undefined ? '' : ` in ${namespace}`}`,
      list: () => this.listPaged(apiVersion, kind, namespace, labelSelector),
      watch: async (resourceVersion, onEvent, done): Promise<WatchHandle> => {
        const path = await this.collectionPath(apiVersion, kind, namespace);
        const query: Record<string, string | number | boolean | undefined> = {
          resourceVersion,
          allowWatchBookmarks: true,
          timeoutSeconds: this.watchTimeoutSeconds(),
          labelSelector,
        };
        const controller = await watcher.watch(
          path,
          query,
          (type: string, object: unknown) => {
            if (typeof object !== 'object' || object === null) return;
            const obj = object as Record<string, unknown>;
            // Watch events carry type meta, but fill it in as list items need it too.
            if (type !== 'ERROR' && type !== 'BOOKMARK') {
              obj['apiVersion'] ??= apiVersion;
              obj['kind'] ??= kind;
            }
            onEvent(type, obj);
          },
          done,
        );
        return { abort: () => controller.abort() };
      },
    };
  }

  private async listPaged(
    apiVersion: string,
    kind: string,
    namespace: string | undefined,
    labelSelector: string | undefined,
  ): Promise<ListResult> {
    const path = await this.collectionPath(apiVersion, kind, namespace);
    const items: KubeObject[] = [];
    let resourceVersion = '';
    let continueToken: string | undefined;
    do {
      const res = await this.request('GET', path, {
        labelSelector,
        limit: LIST_PAGE_SIZE,
        continue: continueToken,
      });
      const body = res.body as { items?: unknown[]; metadata?: { resourceVersion?: string; continue?: string } };
      // Items of typed lists come without apiVersion and kind.
      for (const item of body.items ?? []) items.push(withTypeMeta(item, apiVersion, kind));
      resourceVersion = body.metadata?.resourceVersion ?? resourceVersion;
      continueToken = body.metadata?.continue === '' ? undefined : body.metadata?.continue;
    } while (continueToken !== undefined);
    return { items, resourceVersion };
  }

  private async serverSideApply<T extends KubeObject>(obj: KubeObject, options: ApplyOptions, sub: string): Promise<T> {
    const ref = refOf(obj);
    const path = (await this.objectPath(ref)) + sub;
    // The API server rejects an apply configuration that carries managedFields.
    const { managedFields: _managed, ...metadata } = obj.metadata as KubeObject['metadata'] & {
      managedFields?: unknown;
    };
    const res = await this.request(
      'PATCH',
      path,
      { fieldManager: options.fieldManager, force: options.force ?? true },
      { ...obj, metadata },
      'application/apply-patch+yaml',
    );
    return withTypeMeta<T>(res.body, ref.apiVersion, ref.kind);
  }

  private async objectPath(ref: ObjectRef): Promise<string> {
    const collection = await this.collectionPath(ref.apiVersion, ref.kind, ref.namespace ?? 'default');
    return `${collection}/${encodeURIComponent(ref.name)}`;
  }

  private async collectionPath(apiVersion: string, kind: string, namespace: string | undefined): Promise<string> {
    const info = await this.resource(apiVersion, kind);
    const prefix = apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
    return info.namespaced && namespace !== undefined
      ? `${prefix}/namespaces/${encodeURIComponent(namespace)}/${info.plural}`
      : `${prefix}/${info.plural}`;
  }

  private async resource(apiVersion: string, kind: string): Promise<ResourceInfo> {
    const cached = await this.discovery.get(apiVersion)?.catch(() => undefined);
    const hit = cached?.get(kind);
    if (hit !== undefined) return hit;
    // A miss (or an earlier failure) looks again: the CRD may have been installed since.
    const fresh = this.discover(apiVersion);
    this.discovery.set(apiVersion, fresh);
    const info = (await fresh).get(kind);
    if (info === undefined) {
      throw new KubeApiError(
        404,
        'NotFound',
        `the server doesn't have a resource type for kind ${kind} in ${apiVersion}`,
      );
    }
    return info;
  }

  private async discover(apiVersion: string): Promise<Map<string, ResourceInfo>> {
    const path = apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
    const res = await this.request('GET', path, {}, undefined, undefined, [404]);
    const kinds = new Map<string, ResourceInfo>();
    if (res.status === 404) return kinds;
    const resources = (res.body as { resources?: { name: string; kind: string; namespaced: boolean }[] }).resources;
    for (const r of resources ?? []) {
      // Subresources (`deployments/status`) repeat the kind; only the resource itself names the path.
      if (!r.name.includes('/')) kinds.set(r.kind, { plural: r.name, namespaced: r.namespaced });
    }
    return kinds;
  }

  /** One request; statuses ≥ 400 become KubeApiError unless listed in `allow`. */
  private async request(
    method: string,
    path: string,
    query: Record<string, string | number | boolean | undefined>,
    body?: unknown,
    contentType?: string,
    allow: readonly number[] = [],
  ): Promise<Response> {
    const cluster = this.kubeConfig.getCurrentCluster();
    if (cluster === null) throw new Error('the kubeconfig has no current cluster');
    const url = new URL(cluster.server.replace(/\/+$/, '') + path);
    for (const [k, v] of Object.entries(query)) if (v !== undefined) url.searchParams.set(k, String(v));

    const options: https.RequestOptions = {};
    await this.kubeConfig.applyToHTTPSOptions(options);
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const headers: http.OutgoingHttpHeaders = { ...(options.headers as http.OutgoingHttpHeaders | undefined) };
    headers['accept'] = 'application/json';
    if (payload !== undefined) {
      headers['content-type'] = contentType ?? 'application/json';
      headers['content-length'] = payload.length;
    }
    const agent = cluster.proxyUrl === undefined ? this.pooledAgent(url, options) : options.agent;

    const res = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = (url.protocol === 'http:' ? http : https).request(
        url,
        { ...options, method, headers, agent, timeout: this.requestTimeoutMs },
        (incoming: IncomingMessage) => {
          const chunks: Buffer[] = [];
          incoming.on('data', (c: Buffer) => chunks.push(c));
          incoming.on('error', reject);
          incoming.on('end', () =>
            resolve({ status: incoming.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }),
          );
        },
      );
      req.on('timeout', () =>
        req.destroy(new Error(`${method} ${path}: no answer within ${this.requestTimeoutMs} ms`)),
      );
      req.on('error', reject);
      req.end(payload);
    });

    const parsed = parseJson(res.text);
    if (res.status >= 400 && !allow.includes(res.status)) throw statusError(res.status, parsed, res.text);
    return { status: res.status, body: parsed };
  }

  /**
   * applyToHTTPSOptions builds a new agent per call, which would open a connection (and a TLS handshake) per request.
   * Keep one keep-alive agent per TLS configuration instead; tokens travel in headers, so they stay fresh.
   */
  private pooledAgent(url: URL, options: https.RequestOptions): http.Agent {
    const tls = JSON.stringify([
      url.protocol,
      bufferText(options.ca),
      bufferText(options.cert),
      bufferText(options.key),
      options.rejectUnauthorized,
      options.servername,
    ]);
    if (this.agent?.tls !== tls) {
      this.agent?.agent.destroy();
      const agentOptions = {
        keepAlive: true,
        ...(options.ca === undefined ? {} : { ca: options.ca }),
        ...(options.cert === undefined ? {} : { cert: options.cert }),
        ...(options.key === undefined ? {} : { key: options.key }),
        ...(options.rejectUnauthorized === undefined ? {} : { rejectUnauthorized: options.rejectUnauthorized }),
        ...(options.servername === undefined ? {} : { servername: options.servername }),
      };
      this.agent = {
        tls,
        agent: url.protocol === 'http:' ? new http.Agent(agentOptions) : new https.Agent(agentOptions),
      };
    }
    return this.agent.agent;
  }

  /** Closes pooled connections (at shutdown, so the process can exit). */
  close(): void {
    this.agent?.agent.destroy();
    this.agent = undefined;
  }
}

function bufferText(value: unknown): unknown {
  if (Buffer.isBuffer(value)) return value.toString('base64');
  if (Array.isArray(value)) return value.map(bufferText);
  return value;
}

function parseJson(text: string): unknown {
  if (text === '') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    // Not JSON (a proxy's HTML error page, say): the caller sees the text in the error message.
    return undefined;
  }
}

function statusError(status: number, body: unknown, text: string): KubeApiError {
  const s = (typeof body === 'object' && body !== null ? body : {}) as { reason?: unknown; message?: unknown };
  const reason = typeof s.reason === 'string' && s.reason !== '' ? s.reason : (STATUS_CODES[status] ?? 'Unknown');
  const message = typeof s.message === 'string' ? s.message : text.slice(0, 500) || reason;
  return new KubeApiError(status, reason, message);
}

/**
 * Maps what client-node throws to KubeApiError: `ApiException` (generated clients; `body` is the Status as a string)
 * and the `statusCode` errors of `Watch`. Anything else (network errors) is returned as is.
 */
export function toKubeApiError(err: unknown): unknown {
  if (err instanceof KubeApiError) return err;
  if (err instanceof ApiException) {
    const body: unknown = typeof err.body === 'string' ? parseJson(err.body) : err.body;
    return statusError(err.code, body, typeof err.body === 'string' ? err.body : err.message);
  }
  if (err instanceof Error && typeof (err as { statusCode?: unknown }).statusCode === 'number') {
    const code = (err as unknown as { statusCode: number }).statusCode;
    return new KubeApiError(code, STATUS_CODES[code] ?? 'Unknown', err.message);
  }
  return err;
}

function withTypeMeta<T extends KubeObject>(body: unknown, apiVersion: string, kind: string): T {
  if (typeof body !== 'object' || body === null) throw new Error(`expected a ${kind} object, got ${String(body)}`);
  const obj = body as Record<string, unknown>;
  obj['apiVersion'] ??= apiVersion;
  obj['kind'] ??= kind;
  return obj as T;
}

function refOf(obj: KubeObject): ObjectRef {
  const { namespace } = obj.metadata;
  return namespace === undefined
    ? { apiVersion: obj.apiVersion, kind: obj.kind, name: obj.metadata.name }
    : { apiVersion: obj.apiVersion, kind: obj.kind, namespace, name: obj.metadata.name };
}

export interface EventRecorderOptions {
  /** `reportingInstance`: the pod name. */
  readonly reportingInstance: string;
  readonly reportingController?: string;
  /** Repeats of the same (object, type, reason, note) within this window bump the existing Event's series. */
  readonly seriesWindowMs?: number;
  readonly now?: () => Date;
  readonly log?: Logger;
}

interface SeriesEntry {
  readonly namespace: string;
  readonly name: string;
  count: number;
  lastSeen: number;
}

const DEFAULT_SERIES_WINDOW_MS = 5 * 60_000;
const MAX_SERIES_ENTRIES = 4_096;

/**
 * `events.k8s.io/v1` Events. Best effort, as in client-go: a failure to record is logged and never fails the caller's
 * reconcile. Repeats within the window patch `series` ({count, lastObservedTime}) on the first Event instead of
 * creating new ones; if that Event has gone meanwhile, a new one starts.
 */
export class ClientNodeEventRecorder implements EventRecorder {
  private readonly series = new Map<string, SeriesEntry>();
  /** Records of one key run one after the other, so concurrent repeats do not each create an Event. */
  private readonly chains = new Map<string, Promise<void>>();
  private readonly windowMs: number;
  private readonly now: () => Date;
  private readonly log: Logger;
  private readonly reportingController: string;

  constructor(
    private readonly kube: Pick<ClientNodeKube, 'create' | 'mergePatch'>,
    private readonly options: EventRecorderOptions,
  ) {
    this.windowMs = options.seriesWindowMs ?? DEFAULT_SERIES_WINDOW_MS;
    this.now = options.now ?? (() => new Date());
    this.log = options.log ?? silentLogger();
    this.reportingController = options.reportingController ?? 'ratchet.dev/operator';
  }

  record(regarding: KubeObject, type: EventType, reason: string, note: string, action?: string): Promise<void> {
    const m = regarding.metadata;
    const key = JSON.stringify([
      m.uid ?? '',
      regarding.apiVersion,
      regarding.kind,
      m.namespace ?? '',
      m.name,
      type,
      reason,
      note,
    ]);
    const previous = this.chains.get(key) ?? Promise.resolve();
    const next = previous.then(() => this.recordNow(key, regarding, type, reason, note, action ?? reason));
    this.chains.set(key, next);
    return next.finally(() => {
      if (this.chains.get(key) === next) this.chains.delete(key);
    });
  }

  private async recordNow(
    key: string,
    regarding: KubeObject,
    type: EventType,
    reason: string,
    note: string,
    action: string,
  ): Promise<void> {
    const now = this.now();
    const m = regarding.metadata;
    try {
      const entry = this.series.get(key);
      if (entry !== undefined && now.getTime() - entry.lastSeen <= this.windowMs) {
        const ref = { apiVersion: 'events.k8s.io/v1', kind: 'Event', namespace: entry.namespace, name: entry.name };
        try {
          await this.kube.mergePatch(ref, {
            series: { count: entry.count + 1, lastObservedTime: microTime(now) },
          });
          entry.count++;
          entry.lastSeen = now.getTime();
          return;
        } catch (err) {
          if (!KubeApiError.isNotFound(err)) throw err;
          // The Event expired (TTL) or was deleted: start a new one.
        }
      }
      const namespace = m.namespace ?? 'default';
      const name = `${m.name.slice(0, 200)}.${randomBytes(8).toString('hex')}`;
      await this.kube.create({
        apiVersion: 'events.k8s.io/v1',
        kind: 'Event',
        metadata: { name, namespace },
        eventTime: microTime(now),
        reportingController: this.reportingController,
        reportingInstance: this.options.reportingInstance,
        action,
        reason,
        note: note.slice(0, 1024),
        type,
        regarding: {
          apiVersion: regarding.apiVersion,
          kind: regarding.kind,
          name: m.name,
          ...(m.namespace === undefined ? {} : { namespace: m.namespace }),
          ...(m.uid === undefined ? {} : { uid: m.uid }),
          ...(m.resourceVersion === undefined ? {} : { resourceVersion: m.resourceVersion }),
        },
      });
      this.prune(now.getTime());
      this.series.set(key, { namespace, name, count: 1, lastSeen: now.getTime() });
    } catch (err) {
      this.log.warn({ err, reason, regarding: `${m.namespace ?? ''}/${m.name}` }, 'could not record event');
    }
  }

  private prune(now: number): void {
    if (this.series.size < MAX_SERIES_ENTRIES) return;
    for (const [key, entry] of this.series) if (now - entry.lastSeen > this.windowMs) this.series.delete(key);
    // Still full of recent entries: forget the oldest (Map iteration order is insertion order).
    for (const key of this.series.keys()) {
      if (this.series.size < MAX_SERIES_ENTRIES) break;
      this.series.delete(key);
    }
  }
}
