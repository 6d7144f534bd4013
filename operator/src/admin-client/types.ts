/*
 * The part of the Ratchet (Restate 1.7 compatible) admin API the operator uses. Field names are the admin API's own
 * (snake_case), as in ../shared/spec/restate-1.7.12-admin-openapi.json.
 */

export interface VersionInfo {
  version: string;
  min_admin_api_version: number;
  max_admin_api_version: number;
}

export interface RegisterDeploymentRequest {
  uri?: string;
  arn?: string;
  assume_role_arn?: string;
  additional_headers?: Record<string, string>;
  use_http_11?: boolean;
  /** Always sent explicitly: restate's schema defaults it to true (restate-operator #178). */
  force: boolean;
  breaking?: boolean;
  dry_run?: boolean;
  metadata?: Record<string, string>;
}

export interface ServiceRevision {
  name: string;
  revision: number;
  [field: string]: unknown;
}

export interface RegisterDeploymentResponse {
  id: string;
  services: ServiceRevision[];
  min_protocol_version?: number;
  max_protocol_version?: number;
  sdk_version?: string | null;
}

/** `GET /deployments/{id}`: the endpoint (uri or arn) and what it serves. */
export interface DeploymentInfo {
  id: string;
  uri?: string;
  arn?: string;
  assume_role_arn?: string | null;
  additional_headers?: Record<string, string>;
  created_at?: string;
  min_protocol_version?: number;
  max_protocol_version?: number;
  sdk_version?: string | null;
  services: ServiceRevision[];
  [field: string]: unknown;
}

export interface UpdateDeploymentRequest {
  additional_headers?: Record<string, string>;
  assume_role_arn?: string;
  /** HTTP deployments only: re-discovers the endpoint with (or without) HTTP/1.1 under the same deployment id. */
  use_http_11?: boolean;
  /** Re-run discovery against the endpoint. */
  overwrite?: boolean;
}

export interface ServiceInfo {
  name: string;
  revision: number;
  deployment_id: string;
  ty?: string;
  [field: string]: unknown;
}

export interface KafkaClusterInfo {
  name: string;
  properties: Record<string, string>;
}

export interface SubscriptionInfo {
  id: string;
  source: string;
  sink: string;
  options: Record<string, string>;
}

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

/** One runtime's admin API. Methods throw AdminApiError for error answers and for an unreachable runtime (status 0). */
export interface AdminClient {
  version(): Promise<VersionInfo>;
  /** Registers (POST /deployments); `created` is false for 200 (already registered, unchanged). */
  registerDeployment(
    req: RegisterDeploymentRequest,
  ): Promise<{ created: boolean; deployment: RegisterDeploymentResponse }>;
  getDeployment(id: string): Promise<DeploymentInfo | undefined>;
  listDeployments(): Promise<DeploymentInfo[]>;
  updateDeployment(id: string, req: UpdateDeploymentRequest): Promise<DeploymentInfo>;
  /** DELETE /deployments/{id}?force=…; false when it did not exist. */
  deleteDeployment(id: string, options: { force: boolean }): Promise<boolean>;
  listServices(): Promise<ServiceInfo[]>;
  /** POST /query with Accept: application/json; the rows. */
  query(sql: string): Promise<Record<string, unknown>[]>;
  listKafkaClusters(): Promise<KafkaClusterInfo[]>;
  createKafkaCluster(cluster: KafkaClusterInfo): Promise<void>;
  updateKafkaCluster(name: string, properties: Record<string, string>): Promise<void>;
  deleteKafkaCluster(name: string): Promise<boolean>;
  listSubscriptions(): Promise<SubscriptionInfo[]>;
  getSubscription(id: string): Promise<SubscriptionInfo | undefined>;
  createSubscription(req: Omit<SubscriptionInfo, 'id'>): Promise<SubscriptionInfo>;
  deleteSubscription(id: string): Promise<boolean>;
}

/** Where a runtime's admin API is and the bearer token to call it with (managed mode). */
export interface AdminTarget {
  url: string;
  token?: string;
}

export type AdminClientFactory = (target: AdminTarget) => AdminClient;
