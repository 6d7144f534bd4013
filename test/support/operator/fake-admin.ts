import {
  AdminApiError,
  type AdminClient,
  type AdminClientFactory,
  type AdminTarget,
  type CreateKafkaClusterRequest,
  type CreateSubscriptionRequest,
  type DeploymentResponse,
  type DetailedDeploymentResponse,
  type RegisterDeploymentRequest,
  type RegisterDeploymentResponse,
  type ServiceMetadata,
  type SimpleKafkaClusterResponse,
  type SubscriptionResponse,
  type SubscriptionStatusResponse,
  type UpdateDeploymentRequest,
  type VersionInformation,
} from '../../../operator/src/admin-client/types.ts';
import type { DrainCounts, DrainProbe, DrainQuery } from '../../../operator/src/controllers/deployment/drain.ts';

/*
 * An in-memory model of one runtime's admin API (operator.md §7 L1), with Ratchet's semantics where they matter to the
 * operator:
 *
 * - registration discovers the endpoint (what `serve()` said it serves): a new endpoint → 201 and a new `dp_…` id;
 *   the same endpoint with the same manifest and no force → 200, unchanged (it does NOT become latest again); a
 *   different manifest without force → 409 META0004; force → 200, same id, overwritten and latest for its services;
 * - every registration that changes something makes the deployment the latest of each service it serves;
 * - DELETE without force → 501 (as restate and Ratchet answer); with force it goes, and its services fall back to
 *   the highest revision another deployment registers, or disappear;
 * - invocations the test adds, pinned or not, answer the drain count (`drainProbe`, and `query()` for the SQL the
 *   controller sends);
 * - subscriptions with restate's validation and defaulted options, Kafka clusters; each subscription's consumer status
 *   (`GET /subscriptions/{id}/status`) is consuming (group = the subscription id, partitions 0–3, lag 0) unless a
 *   test sets another (`setSubscriptionStatus`);
 * - fault injection per operation, and an "unreachable" switch (status 0, like a refused connection).
 *
 * Requests and answers are the admin API model's types (runtime/src/admin/model/), as the operator's client sends and
 * reads them.
 */

export type AdminOp = Exclude<keyof AdminClient, symbol> | 'drainProbe';

export type FakeInvocationStatus =
  'pending' | 'scheduled' | 'ready' | 'running' | 'backing-off' | 'suspended' | 'paused' | 'completed';

export interface FakeInvocation {
  readonly id: string;
  readonly service: string;
  status: FakeInvocationStatus;
  pinnedTo: string | undefined;
  lastAttempt: string | undefined;
}

/** A deployment as this fake runtime keeps it (what `deploymentById` shows a test). */
export interface FakeDeployment {
  id: string;
  uri?: string;
  arn?: string;
  assume_role_arn?: string;
  additional_headers: Record<string, string>;
  use_http_11: boolean;
  metadata: Record<string, string>;
  manifest: string;
  services: { name: string; revision: number; handlers: string[] }[];
  created_at: string;
}

interface StoredService {
  name: string;
  revision: number;
  deployment_id: string;
  handlers: string[];
}

interface Fault {
  readonly match: (op: AdminOp) => boolean;
  readonly error: () => AdminApiError;
  times: number;
}

export interface RequestRecord {
  readonly op: AdminOp;
  readonly target: AdminTarget | undefined;
  readonly args: readonly unknown[];
}

const EPOCH = new Date(0).toISOString();
const PROTOCOL = { min_protocol_version: 5, max_protocol_version: 6, sdk_version: 'restate-sdk-typescript/fake' };

/** A service revision as the admin API shows it; every handler of the fake takes and returns nothing. */
function serviceMetadata(name: string, revision: number, deploymentId: string, handlers: string[]): ServiceMetadata {
  return {
    name,
    ty: 'Service',
    handlers: handlers.map((handler) => ({ name: handler, input_description: 'none', output_description: 'none' })),
    deployment_id: deploymentId,
    revision,
  };
}

const DRAIN_ID = /pinned_deployment_id = '([^']*)'/;
const DRAIN_SERVICES = /target_service_name IN \(([^)]*)\)/;

export class FakeAdmin implements AdminClient {
  private readonly deployments = new Map<string, FakeDeployment>();
  private readonly services = new Map<string, StoredService>();
  private readonly endpoints = new Map<string, Record<string, string[]>>();
  private readonly invocations = new Map<string, FakeInvocation>();
  private readonly kafka = new Map<string, Record<string, string>>();
  private readonly subscriptions = new Map<string, SubscriptionResponse>();
  private readonly consumerStatuses = new Map<string, Partial<SubscriptionStatusResponse>>();
  private readonly faults: Fault[] = [];
  private nextId = 1;
  private currentTarget: AdminTarget | undefined;

  /** While true every call fails as a refused connection would (status 0). */
  unreachable = false;
  /** Every call, in order (the arguments as the operator passed them). */
  readonly requests: RequestRecord[] = [];
  /** Every target the operator built a client for. */
  readonly targets: AdminTarget[] = [];

  /** The factory the reconcile context gets: every client is this one runtime. */
  readonly factory: AdminClientFactory = (target) => {
    this.targets.push(target);
    return this.as(target);
  };

  /** A drain probe answering from the invocations the test added, without SQL. */
  readonly drainProbe: DrainProbe = (_admin, query) =>
    this.call('drainProbe', [query], () => this.unfinishedCounts(query));

  // ------------------------------------------------------------------------------------------------------------------
  // test controls

  /** What discovery of `endpoint` (a URI or an ARN) returns: service name → handler names. */
  serve(endpoint: string, services: Record<string, string[]>): void {
    this.endpoints.set(endpoint, services);
  }

  stopServing(endpoint: string): void {
    this.endpoints.delete(endpoint);
  }

  addKafkaCluster(name: string, properties: Record<string, string> = { 'bootstrap.servers': '127.0.0.1:9' }): void {
    this.kafka.set(name, properties);
  }

  /** An unfinished invocation of `service`; pinned to a deployment once it ran there. */
  addInvocation(
    service: string,
    options: { pinnedTo?: string; status?: FakeInvocationStatus; lastAttempt?: string } = {},
  ): string {
    const id = `inv_${String(this.nextId++).padStart(6, '0')}`;
    this.invocations.set(id, {
      id,
      service,
      status: options.status ?? (options.pinnedTo === undefined ? 'pending' : 'running'),
      pinnedTo: options.pinnedTo,
      lastAttempt: options.lastAttempt ?? options.pinnedTo,
    });
    return id;
  }

  /** Starts a pending invocation on the latest deployment of its service (pins it), as the runtime does. */
  start(invocationId: string): void {
    const inv = this.mustInvocation(invocationId);
    const latest = this.services.get(inv.service)?.deployment_id;
    inv.pinnedTo ??= latest;
    inv.lastAttempt = inv.pinnedTo;
    inv.status = 'running';
  }

  setInvocationStatus(invocationId: string, status: FakeInvocationStatus): void {
    this.mustInvocation(invocationId).status = status;
  }

  finish(invocationId: string): void {
    this.mustInvocation(invocationId).status = 'completed';
  }

  finishAll(): void {
    for (const inv of this.invocations.values()) inv.status = 'completed';
  }

  /** The next `times` calls of an operation matching `op` fail with `error`. */
  failNext(op: AdminOp | ((op: AdminOp) => boolean), error: () => AdminApiError, times = 1): void {
    this.faults.push({ match: typeof op === 'function' ? op : (o) => o === op, error, times });
  }

  /** A second user of the runtime (the CLI, another operator) registering directly. */
  registerDirectly(req: RegisterDeploymentRequest): { created: boolean; deployment: RegisterDeploymentResponse } {
    return this.doRegister(req);
  }

  deleteDirectly(id: string): void {
    this.removeDeployment(id);
  }

  deleteSubscriptionDirectly(id: string): void {
    this.subscriptions.delete(id);
  }

  /**
   * What `GET /subscriptions/{id}/status` answers for subscription `id` (`'*'`: for every subscription without its
   * own), over the default of a consumer that joined with partitions 0–3 and no lag; `undefined` restores the default.
   */
  setSubscriptionStatus(id: string, status: Partial<SubscriptionStatusResponse> | undefined): void {
    if (status === undefined) this.consumerStatuses.delete(id);
    else this.consumerStatuses.set(id, structuredClone(status));
  }

  /** A consumer that has not joined (yet): not ready, with the runtime's reason; `error` makes it a failed one. */
  static notReady(reason: string, error?: string): Partial<SubscriptionStatusResponse> {
    const failure = error === undefined ? null : { message: error, at: EPOCH };
    return {
      ready: false,
      reason,
      assigned_partitions: [],
      lag: null,
      consumers: [
        {
          node: 'ratchet-0',
          state: failure === null ? 'starting' : 'failed',
          member_id: null,
          partitions: [],
          error: failure,
          updated_at: EPOCH,
        },
      ],
      error: failure,
    };
  }

  deploymentIds(): string[] {
    return [...this.deployments.keys()];
  }

  deploymentById(id: string): FakeDeployment | undefined {
    const d = this.deployments.get(id);
    return d === undefined ? undefined : structuredClone(d);
  }

  latestOf(service: string): string | undefined {
    return this.services.get(service)?.deployment_id;
  }

  subscriptionList(): SubscriptionResponse[] {
    return [...this.subscriptions.values()].map((s) => structuredClone(s));
  }

  /** Requests of one operation. */
  calls(op: AdminOp): RequestRecord[] {
    return this.requests.filter((r) => r.op === op);
  }

  unfinishedCounts(query: DrainQuery): DrainCounts {
    let pinned = 0;
    let unpinned = 0;
    for (const inv of this.invocations.values()) {
      if (inv.status === 'completed') continue;
      if (inv.pinnedTo === query.deploymentId) pinned++;
      else if (
        inv.pinnedTo === undefined &&
        (inv.lastAttempt === query.deploymentId || query.latestForServices.includes(inv.service))
      ) {
        unpinned++;
      }
    }
    return { pinned, unpinned };
  }

  // ------------------------------------------------------------------------------------------------------------------
  // AdminClient

  version(): Promise<VersionInformation> {
    return this.call('version', [], () => ({
      version: '0.0.0-fake',
      min_admin_api_version: 2,
      max_admin_api_version: 4,
      features: {},
    }));
  }

  registerDeployment(
    req: RegisterDeploymentRequest & { force: boolean },
  ): Promise<{ created: boolean; deployment: RegisterDeploymentResponse }> {
    return this.call('registerDeployment', [structuredClone(req)], () => this.doRegister(req));
  }

  getDeployment(id: string): Promise<DetailedDeploymentResponse | undefined> {
    return this.call('getDeployment', [id], () => {
      const d = this.deployments.get(id);
      return d === undefined ? undefined : this.detailed(d);
    });
  }

  listDeployments(): Promise<DeploymentResponse[]> {
    return this.call('listDeployments', [], () => [...this.deployments.values()].map((d) => this.listed(d)));
  }

  updateDeployment(id: string, req: UpdateDeploymentRequest): Promise<DetailedDeploymentResponse> {
    return this.call('updateDeployment', [id, structuredClone(req)], () => {
      const d = this.deployments.get(id);
      if (d === undefined) throw new AdminApiError(404, `deployment '${id}' not found`);
      // null, like absent, leaves a setting unchanged.
      if (req.additional_headers !== undefined && req.additional_headers !== null) {
        d.additional_headers = { ...req.additional_headers };
      }
      if ('assume_role_arn' in req && typeof req.assume_role_arn === 'string') d.assume_role_arn = req.assume_role_arn;
      if ('use_http_11' in req && typeof req.use_http_11 === 'boolean') d.use_http_11 = req.use_http_11;
      return this.detailed(d);
    });
  }

  deleteDeployment(id: string, options: { force: boolean }): Promise<boolean> {
    return this.call('deleteDeployment', [id, { ...options }], () => {
      if (!this.deployments.has(id)) return false;
      // Neither restate nor Ratchet implements the unforced form.
      if (!options.force) throw new AdminApiError(501, 'answered 501');
      this.removeDeployment(id);
      return true;
    });
  }

  listServices(): Promise<ServiceMetadata[]> {
    return this.call('listServices', [], () =>
      [...this.services.values()].map((s) => serviceMetadata(s.name, s.revision, s.deployment_id, s.handlers)),
    );
  }

  query(sql: string): Promise<Record<string, unknown>[]> {
    return this.call('query', [sql], () => {
      const id = DRAIN_ID.exec(sql)?.[1];
      if (id === undefined || !sql.includes('FROM sys_invocation')) {
        throw new AdminApiError(400, `the fake admin API only answers the drain query, not: ${sql}`);
      }
      const list = DRAIN_SERVICES.exec(sql)?.[1];
      const services =
        list === undefined ? [] : list.split(',').map((s) => s.trim().replace(/^'|'$/g, '').replaceAll("''", "'"));
      const counts = this.unfinishedCounts({ deploymentId: id.replaceAll("''", "'"), latestForServices: services });
      return [{ pinned: counts.pinned, unpinned: counts.unpinned }];
    });
  }

  listKafkaClusters(): Promise<SimpleKafkaClusterResponse[]> {
    return this.call('listKafkaClusters', [], () =>
      [...this.kafka.entries()].map(([name, properties]) => ({
        name,
        properties: { ...properties },
        created_at: EPOCH,
      })),
    );
  }

  createKafkaCluster(cluster: CreateKafkaClusterRequest): Promise<void> {
    return this.call('createKafkaCluster', [structuredClone(cluster)], () => {
      if (this.kafka.has(cluster.name)) throw new AdminApiError(409, `Kafka cluster '${cluster.name}' already exists`);
      this.kafka.set(cluster.name, { ...cluster.properties });
    });
  }

  updateKafkaCluster(name: string, properties: Record<string, string>): Promise<void> {
    return this.call('updateKafkaCluster', [name, { ...properties }], () => {
      if (!this.kafka.has(name)) throw new AdminApiError(404, `Kafka cluster '${name}' not found`);
      this.kafka.set(name, { ...properties });
    });
  }

  deleteKafkaCluster(name: string): Promise<boolean> {
    return this.call('deleteKafkaCluster', [name], () => this.kafka.delete(name));
  }

  listSubscriptions(): Promise<SubscriptionResponse[]> {
    return this.call('listSubscriptions', [], () => this.subscriptionList());
  }

  getSubscription(id: string): Promise<SubscriptionResponse | undefined> {
    return this.call('getSubscription', [id], () => {
      const s = this.subscriptions.get(id);
      return s === undefined ? undefined : structuredClone(s);
    });
  }

  subscriptionStatus(id: string): Promise<SubscriptionStatusResponse | undefined> {
    return this.call('subscriptionStatus', [id], () => {
      const s = this.subscriptions.get(id);
      if (s === undefined) return undefined;
      const partitions = [0, 1, 2, 3];
      const consuming: SubscriptionStatusResponse = {
        subscription_id: id,
        group_id: s.options['group.id'] ?? id,
        topic: /^kafka:\/\/[^/]+\/(.+)$/.exec(s.source)?.[1] ?? '',
        ready: true,
        reason: null,
        assigned_partitions: partitions,
        lag: 0,
        consumers: [
          {
            node: 'ratchet-0',
            state: 'assigned',
            member_id: 'restate-member-0',
            partitions: partitions.map((partition) => ({
              partition,
              position: '0',
              high_watermark: '0',
              lag: 0,
              inflight: 0,
              paused: false,
            })),
            error: null,
            updated_at: EPOCH,
          },
        ],
        error: null,
      };
      return structuredClone({ ...consuming, ...(this.consumerStatuses.get(id) ?? this.consumerStatuses.get('*')) });
    });
  }

  createSubscription(req: CreateSubscriptionRequest): Promise<SubscriptionResponse> {
    return this.call('createSubscription', [structuredClone(req)], () => {
      const source = /^kafka:\/\/([^/]+)\/(.+)$/.exec(req.source);
      if (source === null) throw new AdminApiError(400, `[META0009] invalid source URI '${req.source}'`, 'META0009');
      const cluster = source[1] ?? '';
      if (!this.kafka.has(cluster)) {
        throw new AdminApiError(
          400,
          `[META0009] Kafka cluster '${cluster}' not found. Available clusters: [${[...this.kafka.keys()].join(', ')}]`,
          'META0009',
        );
      }
      const sink = /^service:\/\/([^/]+)\/(.+)$/.exec(req.sink);
      const service = sink === null ? undefined : this.services.get(sink[1] ?? '');
      if (sink === null || service === undefined || !service.handlers.includes(sink[2] ?? '')) {
        throw new AdminApiError(
          400,
          `[META0009] cannot find service/handler specified in the sink URI '${req.sink}'`,
          'META0009',
        );
      }
      const id = `sub_${String(this.nextId++).padStart(6, '0')}`;
      const created: SubscriptionResponse = {
        id,
        source: req.source,
        sink: req.sink,
        options: { 'client.id': 'restate', 'group.id': id, ...req.options },
      };
      this.subscriptions.set(id, created);
      return structuredClone(created);
    });
  }

  deleteSubscription(id: string): Promise<boolean> {
    return this.call('deleteSubscription', [id], () => this.subscriptions.delete(id));
  }

  // ------------------------------------------------------------------------------------------------------------------

  /** A view of this runtime that records `target` with every request. */
  private as(target: AdminTarget): AdminClient {
    const at = <T>(fn: () => Promise<T>): Promise<T> => {
      this.currentTarget = target;
      return fn();
    };
    return {
      version: () => at(() => this.version()),
      registerDeployment: (req) => at(() => this.registerDeployment(req)),
      getDeployment: (id) => at(() => this.getDeployment(id)),
      listDeployments: () => at(() => this.listDeployments()),
      updateDeployment: (id, req) => at(() => this.updateDeployment(id, req)),
      deleteDeployment: (id, options) => at(() => this.deleteDeployment(id, options)),
      listServices: () => at(() => this.listServices()),
      query: (sql) => at(() => this.query(sql)),
      listKafkaClusters: () => at(() => this.listKafkaClusters()),
      createKafkaCluster: (cluster) => at(() => this.createKafkaCluster(cluster)),
      updateKafkaCluster: (name, properties) => at(() => this.updateKafkaCluster(name, properties)),
      deleteKafkaCluster: (name) => at(() => this.deleteKafkaCluster(name)),
      listSubscriptions: () => at(() => this.listSubscriptions()),
      getSubscription: (id) => at(() => this.getSubscription(id)),
      subscriptionStatus: (id) => at(() => this.subscriptionStatus(id)),
      createSubscription: (req) => at(() => this.createSubscription(req)),
      deleteSubscription: (id) => at(() => this.deleteSubscription(id)),
    };
  }

  private async call<T>(op: AdminOp, args: unknown[], body: () => T): Promise<T> {
    this.requests.push({ op, target: this.currentTarget, args });
    this.currentTarget = undefined;
    await Promise.resolve();
    if (this.unreachable) throw new AdminApiError(0, `admin API unreachable: ECONNREFUSED (fake ${op})`);
    const fault = this.faults.find((f) => f.times > 0 && f.match(op));
    if (fault !== undefined) {
      fault.times--;
      throw fault.error();
    }
    return body();
  }

  private mustInvocation(id: string): FakeInvocation {
    const inv = this.invocations.get(id);
    if (inv === undefined) throw new Error(`no invocation ${id}`);
    return inv;
  }

  /** What a deployment shows besides its services: an HTTP endpoint (with its transport) or a Lambda one. */
  private deploymentFields(d: FakeDeployment) {
    const common = {
      id: d.id,
      additional_headers: { ...d.additional_headers },
      metadata: { ...d.metadata },
      created_at: d.created_at,
      ...PROTOCOL,
    };
    if (d.arn !== undefined) return { ...common, arn: d.arn, assume_role_arn: d.assume_role_arn ?? null };
    return {
      ...common,
      uri: d.uri ?? '',
      protocol_type: d.use_http_11 ? ('RequestResponse' as const) : ('BidiStream' as const),
      http_version: d.use_http_11 ? ('HTTP/1.1' as const) : ('HTTP/2.0' as const),
    };
  }

  private revisions(d: FakeDeployment): ServiceMetadata[] {
    return d.services.map((s) => serviceMetadata(s.name, s.revision, d.id, s.handlers));
  }

  private listed(d: FakeDeployment): DeploymentResponse {
    return { ...this.deploymentFields(d), services: d.services.map((s) => ({ name: s.name, revision: s.revision })) };
  }

  private detailed(d: FakeDeployment): DetailedDeploymentResponse {
    return { ...this.deploymentFields(d), services: this.revisions(d) };
  }

  private response(d: FakeDeployment): RegisterDeploymentResponse {
    return { id: d.id, services: this.revisions(d), ...PROTOCOL };
  }

  private doRegister(req: RegisterDeploymentRequest): { created: boolean; deployment: RegisterDeploymentResponse } {
    const endpoint = 'uri' in req ? req.uri : req.arn;
    const served = this.endpoints.get(endpoint);
    if (served === undefined) {
      throw new AdminApiError(
        500,
        `[META0003] error when calling '${endpoint}': connection refused (fake: nothing serves it)`,
        'META0003',
      );
    }
    const manifest = JSON.stringify(Object.entries(served).sort(([a], [b]) => a.localeCompare(b)));
    const existing = [...this.deployments.values()].find((d) => (d.uri ?? d.arn) === endpoint);
    if (existing !== undefined && !req.force) {
      if (existing.manifest === manifest) return { created: false, deployment: this.response(existing) };
      throw new AdminApiError(
        409,
        `[META0004] the deployment ${existing.id} at '${endpoint}' is already registered with a different set of ` +
          'services; deployments are immutable: use a new URI, or force: true',
        'META0004',
      );
    }
    const d: FakeDeployment = existing ?? {
      id: `dp_${String(this.nextId++).padStart(22, '0')}`,
      ...('uri' in req ? { uri: req.uri } : { arn: req.arn }),
      additional_headers: {},
      use_http_11: false,
      metadata: {},
      manifest,
      services: [],
      created_at: new Date(0).toISOString(),
    };
    d.additional_headers = { ...(req.additional_headers ?? {}) };
    d.use_http_11 = 'use_http_11' in req ? (req.use_http_11 ?? false) : false;
    d.metadata = { ...(req.metadata ?? {}) };
    if ('assume_role_arn' in req && typeof req.assume_role_arn === 'string') d.assume_role_arn = req.assume_role_arn;
    d.manifest = manifest;
    d.services = Object.keys(served)
      .sort()
      .map((name) => ({
        name,
        revision: (this.services.get(name)?.revision ?? 0) + 1,
        handlers: served[name] ?? [],
      }));
    for (const s of d.services) {
      this.services.set(s.name, { name: s.name, revision: s.revision, deployment_id: d.id, handlers: s.handlers });
    }
    this.deployments.set(d.id, d);
    return { created: existing === undefined, deployment: this.response(d) };
  }

  private removeDeployment(id: string): void {
    const d = this.deployments.get(id);
    if (d === undefined) return;
    this.deployments.delete(id);
    for (const s of d.services) {
      if (this.services.get(s.name)?.deployment_id !== id) continue;
      let best: { d: FakeDeployment; revision: number } | undefined;
      for (const other of this.deployments.values()) {
        const r = other.services.find((x) => x.name === s.name)?.revision;
        if (r !== undefined && (best === undefined || r > best.revision)) best = { d: other, revision: r };
      }
      if (best === undefined) {
        this.services.delete(s.name);
      } else {
        const handlers = best.d.services.find((x) => x.name === s.name)?.handlers ?? [];
        this.services.set(s.name, { name: s.name, revision: best.revision, deployment_id: best.d.id, handlers });
      }
    }
  }
}
