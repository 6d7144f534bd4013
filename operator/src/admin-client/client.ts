import type { ListDeploymentsResponse } from '../../../runtime/src/admin/model/deployments.ts';
import type { ListKafkaClustersResponse } from '../../../runtime/src/admin/model/kafka-clusters.ts';
import type { QueryRequest, QueryResponse } from '../../../runtime/src/admin/model/query.ts';
import type { ListServicesResponse } from '../../../runtime/src/admin/model/services.ts';
import type { ListSubscriptionsResponse } from '../../../runtime/src/admin/model/subscriptions.ts';
import { countAdminApiRequest } from '../telemetry/metrics.ts';
import { httpCall } from './transport.ts';
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
} from './types.ts';

/*
 * The admin API over fetch. Every answer other than the documented success becomes an AdminApiError carrying the
 * HTTP status and the runtime's own message and code, so controllers decide on (status, code) alone; a runtime that
 * cannot be reached (refused, reset, DNS, timeout) is status 0. 404 is an answer, not an error, only where the
 * AdminClient interface says "undefined" or "false".
 */

export interface AdminClientOptions {
  /** Per request; the admin API answers in milliseconds, so a stuck runtime must not hold a reconcile for long. */
  readonly timeoutMs?: number;
  /** `POST /query` scans invocations and may take longer. */
  readonly queryTimeoutMs?: number;
  /** Called with every answer's status code (0 when unreachable). Default: `ratchet_operator_admin_api_requests_total`. */
  readonly onResponse?: (code: number) => void;
  /** For tests of the transport; the global fetch otherwise. Not for `https:` targets with TLS options. */
  readonly fetch?: typeof fetch;
}

export const DEFAULT_ADMIN_TIMEOUT_MS = 10_000;
export const DEFAULT_QUERY_TIMEOUT_MS = 30_000;

type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';

interface RequestSpec {
  readonly method: Method;
  readonly path: string;
  readonly body?: unknown;
  readonly query?: Record<string, string>;
  readonly accept?: string;
  /** Statuses that are success for this call. */
  readonly ok: readonly number[];
  /** Answer 404 with `undefined` instead of throwing. */
  readonly notFoundIsAnswer?: boolean;
  readonly timeoutMs?: number;
}

interface Answer {
  readonly status: number;
  readonly text: string;
}

const segment = (value: string): string => encodeURIComponent(value);

/** `{message, restate_code}` (restate) or `{message, service_code}` (Ratchet mirrors both); text bodies as they are. */
export function errorFromAnswer(status: number, text: string, what: string): AdminApiError {
  let message = text.trim();
  let code: string | undefined;
  if (message.startsWith('{')) {
    try {
      const body = JSON.parse(message) as Record<string, unknown>;
      if (typeof body['message'] === 'string') message = body['message'];
      const c = body['restate_code'] ?? body['service_code'];
      if (typeof c === 'string' && c !== '') code = c;
    } catch {
      // Not JSON after all: the text itself is the most useful message.
    }
  }
  if (message === '') message = `${what} answered ${status}`;
  return new AdminApiError(status, message, code);
}

/** `CODE message` of the error fetch wraps in `cause`, or of node:https's own (TLS verification codes included). */
function describeNetworkError(err: unknown): string {
  if (err instanceof Error) {
    if (err.name === 'TimeoutError' || err.name === 'AbortError') return 'timed out';
    const cause = (err as { cause?: unknown }).cause;
    const inner = cause instanceof Error ? cause : err;
    const code = (inner as NodeJS.ErrnoException).code;
    return code === undefined ? inner.message : `${code} ${inner.message}`;
  }
  return String(err);
}

class HttpAdminClient implements AdminClient {
  private readonly base: string;

  constructor(
    private readonly target: AdminTarget,
    private readonly options: AdminClientOptions,
  ) {
    this.base = target.url.replace(/\/+$/, '');
  }

  private async send(spec: RequestSpec): Promise<Answer> {
    const qs = spec.query === undefined ? '' : `?${new URLSearchParams(spec.query).toString()}`;
    const url = `${this.base}${spec.path}${qs}`;
    const headers: Record<string, string> = { accept: spec.accept ?? 'application/json' };
    if (spec.body !== undefined) headers['content-type'] = 'application/json';
    if (this.target.token !== undefined && this.target.token !== '') {
      headers['authorization'] = `Bearer ${this.target.token}`;
    }
    const onResponse = this.options.onResponse ?? ((code: number) => countAdminApiRequest(code));
    let status: number;
    let text: string;
    try {
      ({ status, text } = await httpCall(
        url,
        {
          method: spec.method,
          headers,
          ...(spec.body === undefined ? {} : { body: JSON.stringify(spec.body) }),
          signal: AbortSignal.timeout(spec.timeoutMs ?? this.options.timeoutMs ?? DEFAULT_ADMIN_TIMEOUT_MS),
        },
        this.target.tls,
        this.options.fetch,
      ));
    } catch (err) {
      onResponse(0);
      throw new AdminApiError(
        0,
        `admin API ${spec.method} ${url} unreachable: ${describeNetworkError(err)}`,
        undefined,
      );
    }
    onResponse(status);
    if (spec.ok.includes(status) || (status === 404 && spec.notFoundIsAnswer === true)) return { status, text };
    throw errorFromAnswer(status, text, `${spec.method} ${spec.path}`);
  }

  private async json<T>(spec: RequestSpec): Promise<T> {
    const answer = await this.send(spec);
    return this.parse<T>(answer, spec);
  }

  private parse<T>(answer: Answer, spec: RequestSpec): T {
    try {
      return JSON.parse(answer.text) as T;
    } catch {
      throw new AdminApiError(
        answer.status,
        `${spec.method} ${spec.path} answered ${answer.status} with a body that is not JSON: ${answer.text.slice(0, 200)}`,
      );
    }
  }

  version(): Promise<VersionInformation> {
    return this.json<VersionInformation>({ method: 'GET', path: '/version', ok: [200] });
  }

  async registerDeployment(
    req: RegisterDeploymentRequest & { force: boolean },
  ): Promise<{ created: boolean; deployment: RegisterDeploymentResponse }> {
    // `force` is always on the wire as a boolean: restate defaults a missing one to true on some API versions (#178).
    const body: RegisterDeploymentRequest = { ...req, force: req.force === true };
    const spec: RequestSpec = { method: 'POST', path: '/deployments', body, ok: [200, 201] };
    const answer = await this.send(spec);
    return { created: answer.status === 201, deployment: this.parse<RegisterDeploymentResponse>(answer, spec) };
  }

  async getDeployment(id: string): Promise<DetailedDeploymentResponse | undefined> {
    const spec: RequestSpec = { method: 'GET', path: `/deployments/${segment(id)}`, ok: [200], notFoundIsAnswer: true };
    const answer = await this.send(spec);
    return answer.status === 404 ? undefined : this.parse<DetailedDeploymentResponse>(answer, spec);
  }

  async listDeployments(): Promise<DeploymentResponse[]> {
    const body = await this.json<Partial<ListDeploymentsResponse>>({
      method: 'GET',
      path: '/deployments',
      ok: [200],
    });
    return body.deployments ?? [];
  }

  updateDeployment(id: string, req: UpdateDeploymentRequest): Promise<DetailedDeploymentResponse> {
    return this.json<DetailedDeploymentResponse>({
      method: 'PATCH',
      path: `/deployments/${segment(id)}`,
      body: req,
      ok: [200],
    });
  }

  async deleteDeployment(id: string, options: { force: boolean }): Promise<boolean> {
    const answer = await this.send({
      method: 'DELETE',
      path: `/deployments/${segment(id)}`,
      query: { force: String(options.force) },
      ok: [200, 202, 204],
      notFoundIsAnswer: true,
    });
    return answer.status !== 404;
  }

  async listServices(): Promise<ServiceMetadata[]> {
    const body = await this.json<Partial<ListServicesResponse>>({ method: 'GET', path: '/services', ok: [200] });
    return body.services ?? [];
  }

  async query(sql: string): Promise<Record<string, unknown>[]> {
    // Exactly `application/json`: anything else (even */*) is answered with an Arrow IPC stream.
    const request: QueryRequest = { query: sql };
    const body = await this.json<Partial<QueryResponse>>({
      method: 'POST',
      path: '/query',
      body: request,
      accept: 'application/json',
      ok: [200],
      timeoutMs: this.options.queryTimeoutMs ?? DEFAULT_QUERY_TIMEOUT_MS,
    });
    return body.rows ?? [];
  }

  async listKafkaClusters(): Promise<SimpleKafkaClusterResponse[]> {
    const body = await this.json<Partial<ListKafkaClustersResponse>>({
      method: 'GET',
      path: '/kafka-clusters',
      ok: [200],
    });
    return body.clusters ?? [];
  }

  async createKafkaCluster(cluster: CreateKafkaClusterRequest): Promise<void> {
    const body: CreateKafkaClusterRequest = { name: cluster.name, properties: cluster.properties };
    await this.send({
      method: 'POST',
      path: '/kafka-clusters',
      body,
      ok: [200, 201],
    });
  }

  async updateKafkaCluster(name: string, properties: Record<string, string>): Promise<void> {
    await this.send({ method: 'PATCH', path: `/kafka-clusters/${segment(name)}`, body: { properties }, ok: [200] });
  }

  async deleteKafkaCluster(name: string): Promise<boolean> {
    const answer = await this.send({
      method: 'DELETE',
      path: `/kafka-clusters/${segment(name)}`,
      ok: [200, 202, 204],
      notFoundIsAnswer: true,
    });
    return answer.status !== 404;
  }

  async listSubscriptions(): Promise<SubscriptionResponse[]> {
    const body = await this.json<Partial<ListSubscriptionsResponse>>({
      method: 'GET',
      path: '/subscriptions',
      ok: [200],
    });
    return (body.subscriptions ?? []).map(subscriptionInfo);
  }

  async getSubscription(id: string): Promise<SubscriptionResponse | undefined> {
    const spec: RequestSpec = {
      method: 'GET',
      path: `/subscriptions/${segment(id)}`,
      ok: [200],
      notFoundIsAnswer: true,
    };
    const answer = await this.send(spec);
    return answer.status === 404 ? undefined : subscriptionInfo(this.parse<SubscriptionResponse>(answer, spec));
  }

  async subscriptionStatus(id: string): Promise<SubscriptionStatusResponse | undefined> {
    const spec: RequestSpec = {
      method: 'GET',
      path: `/subscriptions/${segment(id)}/status`,
      ok: [200],
      notFoundIsAnswer: true,
    };
    const answer = await this.send(spec);
    return answer.status === 404 ? undefined : consumerStatus(this.parse<SubscriptionStatusResponse>(answer, spec));
  }

  async createSubscription(req: CreateSubscriptionRequest): Promise<SubscriptionResponse> {
    const body: CreateSubscriptionRequest = { source: req.source, sink: req.sink, ...optionsOf(req) };
    const created = await this.json<SubscriptionResponse>({
      method: 'POST',
      path: '/subscriptions',
      body,
      ok: [200, 201],
    });
    return subscriptionInfo(created);
  }

  async deleteSubscription(id: string): Promise<boolean> {
    const answer = await this.send({
      method: 'DELETE',
      path: `/subscriptions/${segment(id)}`,
      ok: [200, 202, 204],
      notFoundIsAnswer: true,
    });
    return answer.status !== 404;
  }
}

/** Only the fields the operator compares; `options` as a map even from a runtime that leaves it out. */
function subscriptionInfo(s: SubscriptionResponse): SubscriptionResponse {
  return { id: s.id, source: s.source, sink: s.sink, options: s.options ?? {} };
}

/** The lists as lists and the nullable fields as null, even from a runtime that leaves some out. */
function consumerStatus(s: SubscriptionStatusResponse): SubscriptionStatusResponse {
  return {
    ...s,
    ready: s.ready === true,
    reason: s.reason ?? null,
    assigned_partitions: s.assigned_partitions ?? [],
    lag: s.lag ?? null,
    consumers: s.consumers ?? [],
    error: s.error ?? null,
  };
}

function optionsOf(req: CreateSubscriptionRequest): Pick<CreateSubscriptionRequest, 'options'> {
  return req.options === undefined ? {} : { options: req.options };
}

/** A factory with options (timeouts, a metrics hook, a fetch for tests). */
export function adminClientFactory(options: AdminClientOptions = {}): AdminClientFactory {
  return (target) => new HttpAdminClient(target, options);
}

/** The production factory: default timeouts, answers counted in `ratchet_operator_admin_api_requests_total`. */
export const createAdminClient: AdminClientFactory = adminClientFactory();
