/**
 * fake-kube: an in-process Kubernetes API server for tests, on 127.0.0.1 and a random port, faithful enough for the
 * real `@kubernetes/client-node` 1.4.0 (typed clients, KubernetesObjectApi, Watch, informers) and the real kubectl.
 *
 * What it does: legacy discovery and a minimal OpenAPI v3 (enough for kubectl's server-side field validation and
 * `kubectl explain` of CRDs); the built-in kinds listed in builtins.ts plus any kind a CRD defines (status and scale
 * subresources, printer columns, short names, categories, several served versions); CRUD with resourceVersion,
 * generation, uid and optimistic concurrency; merge, strategic-merge (approximated), JSON and server-side-apply
 * patches with managed fields, ownership, conflicts and force; watches with resume, bookmarks, 410 Gone and selector
 * transitions; finalizers, ownerReference GC, namespace and CRD cleanup; server-side Tables; RBAC; fault injection;
 * a store API and change hook for test-side controllers ("kubelets").
 *
 * Known gaps, which tests must not rely on:
 * - No schema validation, pruning or defaulting (OpenAPI or CEL); `fieldValidation` is ignored; only names, CRD
 *   basics and the finalizer rules are validated. No `/openapi/v2` (404), so kubectl falls back on nothing when
 *   server-side validation is unavailable: applying a CRD and its custom resources in one `kubectl apply` fails, as it
 *   does on a real cluster, but with a different message.
 * - No admission, webhooks, CRD conversion (all served versions share one stored object), or built-in controllers
 *   other than GC, namespace and CRD cleanup: no pods for workloads, no endpoints, no events. Tests write statuses.
 * - Strategic merge patch is a merge patch whose keyed lists merge by key; list semantics of built-in kinds come from
 *   field names (builtins.ts), not the real OpenAPI markers. CRD lists follow `x-kubernetes-list-type` (atomic when
 *   unmarked, as upstream).
 * - Server-side apply: ownership is tracked per manager and operation, but conflicts only arise between different
 *   manager names; `managedFields` sent by clients are ignored; writes through the store API are recorded under the
 *   manager `fake-kube`.
 * - Foreground deletion behaves as Background; Orphan strips ownerReferences at once (no `orphan` finalizer);
 *   gracePeriodSeconds is ignored (deletion is immediate unless finalizers block it).
 * - `limit`/`continue` are ignored (lists are never paginated); list resourceVersion parameters are ignored (lists
 *   are always current); field selectors accept any dotted path.
 * - Tables: built-in kinds get NAME and AGE only. JSON and YAML only: no protobuf or CBOR, so kubectl's imperative
 *   generators (`kubectl create deployment`, `auth can-i`) fail with 415. No aggregated discovery (clients fall back).
 * - RBAC: no escalation/bind checks, no impersonation, no SubjectAccessReview; discovery is open to every user.
 *   kubectl sends bearer tokens only over TLS, hence HTTPS (fixed self-signed certificate) whenever `rbac` is on.
 */
import { writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { Server as TlsServer, createServer as createTlsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';
import { Controllers } from './controllers.ts';
import { KubeError } from './errors.ts';
import { Faults, type FailureRule, type RequestDescription } from './faults.ts';
import { Authorizer, SUPERUSER_GROUP, type UserInfo } from './rbac.ts';
import { Registry } from './registry.ts';
import { createHandler } from './server.ts';
import { STORE_MANAGER, Store, type DeleteOptions } from './store.ts';
import { CERTIFICATE, PRIVATE_KEY } from './tls.ts';
import { WatchHub, asVersion } from './watch.ts';
import {
  asArray,
  clone,
  isObject,
  splitApiVersion,
  type ChangeEvent,
  type KubeObject,
  type ResourceInfo,
} from './types.ts';

export type { FailureRule, RequestDescription } from './faults.ts';
export type { KubeObject, ObjectMeta, OwnerReference, ResourceInfo } from './types.ts';
export type { DeleteOptions } from './store.ts';
export { KubeError } from './errors.ts';
export { evaluate as evaluateJsonPath } from './tables.ts';

export interface FakeKubeOptions {
  /** Authorize every request against the stored RBAC objects (default false: every request is admin). */
  readonly rbac?: boolean;
  /** How many changes watches can resume across (default 1000); older resourceVersions get 410 Gone. */
  readonly historySize?: number;
  /** BOOKMARK period for watches that allow them (default 1000 ms). */
  readonly bookmarkIntervalMs?: number;
  /**
   * Serve HTTPS with a fixed self-signed certificate (default: when `rbac` is on). kubectl sends bearer tokens only
   * over TLS, so kubectl cannot authenticate as a non-admin user over plain HTTP.
   */
  readonly tls?: boolean;
  /** Namespaces to create besides default, kube-system, kube-public and kube-node-lease. */
  readonly namespaces?: readonly string[];
}

/** What `put` accepts: any object with apiVersion, kind and metadata (client-node models included). */
export interface ObjectInput {
  readonly apiVersion?: string;
  readonly kind?: string;
  readonly metadata?: object;
}

export interface ObjectRef {
  readonly apiVersion: string;
  readonly kind: string;
  readonly name: string;
  readonly namespace?: string;
}

/** A committed change, as `on('change')` listeners see it. */
export interface FakeKubeChange {
  readonly type: 'ADDED' | 'MODIFIED' | 'DELETED';
  readonly apiVersion: string;
  readonly kind: string;
  /** Plural resource name, e.g. `statefulsets`. */
  readonly resource: string;
  readonly object: KubeObject;
  readonly oldObject?: KubeObject;
}

export type ChangeListener = (change: FakeKubeChange) => void | Promise<void>;

export interface KubeconfigOptions {
  /** A user registered with `addUser`/`addServiceAccount`; the admin by default. */
  readonly user?: string;
  /** The context's default namespace. */
  readonly namespace?: string;
  readonly fileName?: string;
}

export const ADMIN_USER = 'fake-kube-admin';

export class FakeKube {
  readonly url: string;
  /** The PEM certificate clients must trust when the fake serves HTTPS. */
  readonly caCertificate = CERTIFICATE;
  readonly adminToken = randomBytes(16).toString('hex');
  /** Every request received (method, path, verb, resource…), oldest first, bounded to the last 10 000. */
  readonly requests: RequestDescription[] = [];
  /** Errors thrown by `on('change')` listeners; a test should assert this stays empty. */
  readonly listenerErrors: unknown[] = [];
  private readonly tokens = new Map<string, UserInfo>();
  private readonly listeners = new Set<ChangeListener>();

  /** @internal Use `startFakeKube`. */
  constructor(
    private readonly server: Server | TlsServer,
    private readonly store: Store,
    private readonly watches: WatchHub,
    private readonly faults: Faults,
    private readonly controllers: Controllers,
  ) {
    const { port } = server.address() as AddressInfo;
    this.url = `${server instanceof TlsServer ? 'https' : 'http'}://127.0.0.1:${port}`;
    this.tokens.set(this.adminToken, { name: ADMIN_USER, groups: [SUPERUSER_GROUP, 'system:authenticated'] });
    store.subscribe((event) => this.notify(event));
  }

  /** @internal */
  authenticate(token: string | undefined): UserInfo | undefined {
    return token === undefined ? undefined : this.tokens.get(token);
  }

  /** @internal */
  record(request: RequestDescription): void {
    this.requests.push(request);
    if (this.requests.length > 10_000) this.requests.splice(0, this.requests.length - 10_000);
  }

  /** Registers a user; returns its bearer token. */
  addUser(name: string, groups: readonly string[] = []): string {
    const token = randomBytes(16).toString('hex');
    this.tokens.set(token, { name, groups: [...groups, 'system:authenticated'] });
    return token;
  }

  /** Registers `system:serviceaccount:<namespace>:<name>` (the ServiceAccount object itself is not created). */
  addServiceAccount(namespace: string, name: string): string {
    return this.addUser(`system:serviceaccount:${namespace}:${name}`, [
      'system:serviceaccounts',
      `system:serviceaccounts:${namespace}`,
    ]);
  }

  tokenOf(user: string): string {
    for (const [token, info] of this.tokens) if (info.name === user) return token;
    throw new Error(`fake-kube: no user ${user}; register it with addUser or addServiceAccount`);
  }

  /** Writes a kubeconfig for this server and returns its path. */
  writeKubeconfig(dir: string, options: KubeconfigOptions = {}): string {
    const user = options.user ?? ADMIN_USER;
    const config = {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [
        {
          name: 'fake-kube',
          cluster: this.url.startsWith('https:')
            ? { server: this.url, 'certificate-authority-data': Buffer.from(CERTIFICATE).toString('base64') }
            : // client-node 1.x refuses http:// servers unless TLS verification is (nominally) skipped.
              { server: this.url, 'insecure-skip-tls-verify': true },
        },
      ],
      users: [{ name: user, user: { token: this.tokenOf(user) } }],
      contexts: [
        {
          name: 'fake-kube',
          context: {
            cluster: 'fake-kube',
            user,
            ...(options.namespace !== undefined ? { namespace: options.namespace } : {}),
          },
        },
      ],
      'current-context': 'fake-kube',
    };
    const path = join(dir, options.fileName ?? `kubeconfig-${user.replaceAll(':', '_')}.yaml`);
    writeFileSync(path, stringify(config), { mode: 0o600 });
    return path;
  }

  // --- Store access: bypasses authentication, RBAC and the status split, keeps every other write rule. ---

  resource(apiVersion: string, kind: string): ResourceInfo {
    const { group, version } = splitApiVersion(apiVersion);
    const info = this.store.registry.byKind(group, version, kind);
    if (info === undefined) throw new Error(`fake-kube: ${apiVersion} ${kind} is not served`);
    return info;
  }

  get(ref: ObjectRef): KubeObject | undefined {
    const info = this.resource(ref.apiVersion, ref.kind);
    const object = this.store.get(info, ref.namespace, ref.name);
    return object === undefined ? undefined : asVersion(object, info, splitApiVersion(ref.apiVersion).version);
  }

  list(apiVersion: string, kind: string, namespace?: string): KubeObject[] {
    const info = this.resource(apiVersion, kind);
    return this.store.list(info, namespace).map((o) => asVersion(o, info, splitApiVersion(apiVersion).version));
  }

  /**
   * Creates the object or replaces it (status included), like a controller with full rights. A set
   * `metadata.resourceVersion` is checked (409 on mismatch); without one the write is unconditional. Generation,
   * finalizer and namespace rules apply; managed fields record the write under the manager `fake-kube`.
   */
  put(input: ObjectInput): KubeObject {
    // Through JSON, so client-node models (Dates, class instances) store as they would travel.
    const object = JSON.parse(JSON.stringify(input)) as KubeObject;
    if (typeof object.apiVersion !== 'string' || typeof object.kind !== 'string' || !isObject(object.metadata)) {
      throw new Error('fake-kube: put needs apiVersion, kind and metadata');
    }
    const info = this.resource(object.apiVersion, object.kind);
    const name = object.metadata.name ?? '';
    const namespace = info.namespaced ? (object.metadata.namespace ?? 'default') : undefined;
    const options = { manager: STORE_MANAGER, target: 'raw' } as const;
    const existing = name === '' ? undefined : this.store.get(info, namespace, name);
    return existing === undefined
      ? this.store.create(info, namespace, object, options)
      : this.store.update(info, namespace, name, object, options);
  }

  /** Read-modify-write, e.g. `fake.update(ref, (o) => { o.status = {...} })` from a test-side kubelet. */
  update(ref: ObjectRef, mutate: (object: KubeObject) => void): KubeObject {
    const object = this.get(ref);
    if (object === undefined) throw new Error(`fake-kube: ${ref.kind} ${ref.namespace ?? ''}/${ref.name} not found`);
    mutate(object);
    return this.put(object);
  }

  /** Deletes as the API would (finalizers set deletionTimestamp instead); undefined when it did not exist. */
  delete(ref: ObjectRef, options: DeleteOptions = {}): KubeObject | undefined {
    const info = this.resource(ref.apiVersion, ref.kind);
    try {
      return this.store.delete(info, ref.namespace, ref.name, options);
    } catch (error) {
      if (error instanceof KubeError && error.code === 404) return undefined;
      throw error;
    }
  }

  /** Creates or replaces every object in a multi-document YAML text (RBAC manifests, CRDs, namespaces, …). */
  loadYaml(text: string): KubeObject[] {
    const objects = parseAllDocuments(text)
      .map((doc) => doc.toJS() as unknown)
      .flatMap((doc) =>
        isObject(doc) && doc['kind'] === 'List' && Array.isArray(doc['items']) ? asArray(doc['items']) : [doc],
      )
      .filter(isObject);
    return objects.map((o) => this.put(o));
  }

  /** Runs `listener` after every committed change, in order, outside the request that caused it. */
  on(_event: 'change', listener: ChangeListener): this {
    this.listeners.add(listener);
    return this;
  }

  off(_event: 'change', listener: ChangeListener): this {
    this.listeners.delete(listener);
    return this;
  }

  /** `on('change')` with an unsubscribe function, optionally for one kind. */
  watchEvents(listener: ChangeListener, filter?: { apiVersion?: string; kind?: string }): () => void {
    const filtered: ChangeListener = (change) =>
      (filter?.kind === undefined || filter.kind === change.kind) &&
      (filter?.apiVersion === undefined || filter.apiVersion === change.apiVersion)
        ? listener(change)
        : undefined;
    this.listeners.add(filtered);
    return () => this.listeners.delete(filtered);
  }

  // --- Fault injection. ---

  /** The next `count` requests matching the rule fail with its status. */
  failNext(rule: FailureRule): void {
    this.faults.failNext(rule);
  }

  /** Delays every request (or those the function gives a positive delay). */
  setLatency(latency: number | ((request: RequestDescription) => number)): void {
    this.faults.setLatency(latency);
  }

  /** Removes pending failures and latency. */
  clearFaults(): void {
    this.faults.clear();
  }

  /** Closes open watches (of one plural resource, if given); `abrupt` resets the connection mid-stream. */
  disconnectWatches(options: { resource?: string; abrupt?: boolean } = {}): number {
    return this.watches.disconnect(
      (r) => options.resource === undefined || r.plural === options.resource,
      options.abrupt === true,
    );
  }

  /** The next watch of this kind answers with a 410 Gone ERROR event, as after etcd compaction. */
  expireNextWatch(apiVersion: string, kind: string): void {
    this.watches.expireNextWatch(this.resource(apiVersion, kind));
  }

  /** Forgets the change history: every watch resuming from an older resourceVersion gets 410 Gone. */
  compactHistory(): void {
    this.store.compact();
  }

  get openWatches(): number {
    return this.watches.openWatches;
  }

  get resourceVersion(): string {
    return String(this.store.resourceVersion);
  }

  async stop(): Promise<void> {
    this.controllers.stop();
    this.watches.disconnect(() => true, false);
    this.listeners.clear();
    await new Promise<void>((resolve, reject) => {
      this.server.close((error) => (error === undefined ? resolve() : reject(error)));
      this.server.closeAllConnections();
    });
  }

  private notify(event: ChangeEvent): void {
    if (this.listeners.size === 0) return;
    const change: FakeKubeChange = {
      type: event.type,
      apiVersion: event.object.apiVersion,
      kind: event.resource.kind,
      resource: event.resource.plural,
      object: clone(event.object),
      ...(event.oldObject !== undefined ? { oldObject: clone(event.oldObject) } : {}),
    };
    const listeners = [...this.listeners];
    queueMicrotask(() => {
      for (const listener of listeners) {
        try {
          const result = listener(change);
          if (result instanceof Promise) result.catch((error: unknown) => this.listenerErrors.push(error));
        } catch (error) {
          this.listenerErrors.push(error);
        }
      }
    });
  }
}

export async function startFakeKube(options: FakeKubeOptions = {}): Promise<FakeKube> {
  const registry = new Registry();
  const store = new Store(registry, options.historySize ?? 1000);
  const namespaces = registry.find('', 'v1', 'namespaces');
  for (const name of ['default', 'kube-system', 'kube-public', 'kube-node-lease', ...(options.namespaces ?? [])]) {
    if (namespaces !== undefined)
      store.create(namespaces, undefined, { metadata: { name } }, { manager: STORE_MANAGER, target: 'raw' });
  }
  const controllers = new Controllers(store);
  const watches = new WatchHub(store, options.bookmarkIntervalMs ?? 1000);
  const faults = new Faults();
  const authorizer = options.rbac === true ? new Authorizer(store) : undefined;
  // The handler needs the FakeKube (tokens, request log), which needs the listening server.
  const holder: { fake?: FakeKube } = {};
  const handler = createHandler({
    store,
    registry,
    watches,
    faults,
    authorizer,
    // Without RBAC every request acts as the admin, with or without a token.
    authenticate: (token) => {
      const known = holder.fake?.authenticate(token);
      if (options.rbac !== true) return known ?? { name: ADMIN_USER, groups: [SUPERUSER_GROUP] };
      return known;
    },
    record: (request) => holder.fake?.record(request),
    serverAddress: () => holder.fake?.url.replace(/^https?:\/\//, '') ?? '',
  });
  const server =
    (options.tls ?? options.rbac === true)
      ? createTlsServer({ cert: CERTIFICATE, key: PRIVATE_KEY }, handler)
      : createServer(handler);
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  holder.fake = new FakeKube(server, store, watches, faults, controllers);
  return holder.fake;
}
