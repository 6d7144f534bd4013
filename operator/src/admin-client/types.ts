import type {
  DeploymentResponse,
  DetailedDeploymentResponse,
  RegisterDeploymentRequest,
  RegisterDeploymentResponse,
  UpdateDeploymentRequest,
} from '../../../runtime/src/admin/model/deployments.ts';
import type {
  CreateKafkaClusterRequest,
  SimpleKafkaClusterResponse,
} from '../../../runtime/src/admin/model/kafka-clusters.ts';
import type { ServiceMetadata } from '../../../runtime/src/admin/model/services.ts';
import type {
  CreateSubscriptionRequest,
  SubscriptionResponse,
  SubscriptionStatusResponse,
} from '../../../runtime/src/admin/model/subscriptions.ts';
import type { VersionInformation } from '../../../runtime/src/admin/model/version.ts';

/*
 * The part of the Ratchet (Restate 1.7 compatible) admin API the operator uses. The shapes are the runtime's admin
 * API model (runtime/src/admin/model/), the one source of the runtime's request checks and OpenAPI document.
 */

export type {
  CreateKafkaClusterRequest,
  CreateSubscriptionRequest,
  DeploymentResponse,
  DetailedDeploymentResponse,
  RegisterDeploymentRequest,
  RegisterDeploymentResponse,
  ServiceMetadata,
  SimpleKafkaClusterResponse,
  SubscriptionResponse,
  SubscriptionStatusResponse,
  UpdateDeploymentRequest,
  VersionInformation,
};

/** An admin API answer other than success, with the runtime's message and code. */
export class AdminApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly code?: string,
  ) {
    super(message);
    this.name = 'AdminApiError';
  }
}

/**
 * Whether the runtime may answer differently later with nothing changed on our side: unreachable (status 0), 408,
 * 429 and server errors. Not 501 Not Implemented: a runtime that does not implement what was asked (a Lambda endpoint
 * on a runtime without Lambda support) refuses it again on every retry, like a 4xx, until the spec or the runtime
 * changes.
 */
export function isTransientAdminError(err: AdminApiError): boolean {
  if (err.status === 501) return false;
  return err.status === 0 || err.status >= 500 || err.status === 408 || err.status === 429;
}

/** One runtime's admin API. Methods throw AdminApiError for error answers and for an unreachable runtime (status 0). */
export interface AdminClient {
  version(): Promise<VersionInformation>;
  /**
   * Registers (POST /deployments); `created` is false for 200 (already registered, unchanged). `force` is required:
   * restate's schema defaults a missing one to true (restate-operator #178), so it is always sent.
   */
  registerDeployment(
    req: RegisterDeploymentRequest & { force: boolean },
  ): Promise<{ created: boolean; deployment: RegisterDeploymentResponse }>;
  getDeployment(id: string): Promise<DetailedDeploymentResponse | undefined>;
  listDeployments(): Promise<DeploymentResponse[]>;
  updateDeployment(id: string, req: UpdateDeploymentRequest): Promise<DetailedDeploymentResponse>;
  /** DELETE /deployments/{id}?force=…; false when it did not exist. */
  deleteDeployment(id: string, options: { force: boolean }): Promise<boolean>;
  listServices(): Promise<ServiceMetadata[]>;
  /** POST /query with Accept: application/json; the rows. */
  query(sql: string): Promise<Record<string, unknown>[]>;
  listKafkaClusters(): Promise<SimpleKafkaClusterResponse[]>;
  createKafkaCluster(cluster: CreateKafkaClusterRequest): Promise<void>;
  updateKafkaCluster(name: string, properties: Record<string, string>): Promise<void>;
  deleteKafkaCluster(name: string): Promise<boolean>;
  listSubscriptions(): Promise<SubscriptionResponse[]>;
  getSubscription(id: string): Promise<SubscriptionResponse | undefined>;
  /**
   * GET /subscriptions/{id}/status (Ratchet): whether a runtime node's consumer has joined the consumer group with
   * partitions assigned, the partitions, the lag and the last error; undefined when the subscription does not exist.
   */
  subscriptionStatus(id: string): Promise<SubscriptionStatusResponse | undefined>;
  createSubscription(req: CreateSubscriptionRequest): Promise<SubscriptionResponse>;
  deleteSubscription(id: string): Promise<boolean>;
}

/**
 * TLS of a call to an HTTPS listener of a runtime. The listener's certificate must chain to `ca` (which replaces the
 * system roots); a certificate in `ca` is trusted as it stands, so the server's own certificate may serve as its trust
 * anchor. `cert` and `key` are the client certificate, for a listener that verifies client certificates. PEM text.
 */
export interface ClientTls {
  readonly ca: string;
  readonly cert?: string;
  readonly key?: string;
}

/** Where a runtime's admin API is, the bearer token to call it with (managed mode), and TLS for `https:` URLs. */
export interface AdminTarget {
  url: string;
  token?: string;
  tls?: ClientTls;
}

export type AdminClientFactory = (target: AdminTarget) => AdminClient;
