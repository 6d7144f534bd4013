import type {
  DeploymentEndpoint,
  DeploymentSchema,
  KafkaClusterSchema,
  ServiceOverrides,
  ServiceSchema,
  ServiceType,
  SubscriptionSchema,
} from './types.ts';

/**
 * Storage contract of the schema tables (`ratchet.deployment`, `ratchet.service_revision`, `ratchet.service`,
 * `ratchet.kafka_cluster`, `ratchet.subscription`). The PostgreSQL implementation is `storage/pg/tables/schema.ts`
 * (Kafka clusters and subscriptions in `storage/pg/tables/subscriptions.ts`).
 */

export interface StoredRevision {
  name: string;
  revision: number;
  deploymentId: string;
  schema: ServiceSchema;
}

export interface StoredService {
  name: string;
  revision: number;
  deploymentId: string;
  ty: ServiceType;
  overrides: ServiceOverrides;
}

export interface SchemaRows {
  deployments: DeploymentSchema[];
  /** The revisions some deployment still lists (older ones are unreachable and not loaded). */
  revisions: StoredRevision[];
  services: StoredService[];
  /** Registered through the admin API (the configuration file's clusters are added by the registry). */
  kafkaClusters: KafkaClusterSchema[];
  /** Oldest first. */
  subscriptions: SubscriptionSchema[];
}

export interface RegistrationWrite {
  deployment: DeploymentSchema;
  /** The discovery response as received, kept for diagnosis. */
  manifest: unknown;
  /** true: the deployment row with this id exists and is overwritten (forced registration). */
  overwrite: boolean;
  /** One per exposed service, with the revision it gets; `deployment.services` lists the same pairs. */
  revisions: { schema: ServiceSchema; revision: number }[];
  /** Services that pointed to the overwritten deployment and that it no longer exposes: they are removed. */
  removedServices: string[];
}

/** Reads and writes inside one transaction that holds the schema lock, so registrations never interleave. */
/** An in-place update of a deployment (`PATCH /deployments/{id}`). */
export interface DeploymentUpdateWrite {
  /** The deployment as it is after the update (same id, same creation time). */
  deployment: DeploymentSchema;
  /** The new discovery response, stored only when the service schemas were replaced (`overwrite`). */
  manifest: unknown;
  /** Service revisions (re)written for this deployment; empty when only connection details changed. */
  revisions: { schema: ServiceSchema; revision: number }[];
}

/**
 * Reads and writes inside one transaction that holds the schema lock, so changes never interleave. Writers call
 * `announce()` once, so that every runtime process reloads after the commit.
 */
export interface SchemaTransaction {
  /** Deployments with this endpoint's address (URI or ARN), oldest first. */
  deploymentsAt(endpoint: DeploymentEndpoint): Promise<DeploymentSchema[]>;
  deployment(id: string): Promise<DeploymentSchema | undefined>;
  /** The service schemas a deployment registered, in its `services` order. */
  revisionsOf(deployment: DeploymentSchema): Promise<ServiceSchema[]>;
  latestServices(names: readonly string[]): Promise<Map<string, StoredService>>;
  /** Highest revision any deployment ever registered for each name (0 when none), so a new revision never reuses one. */
  highestRevisions(names: readonly string[]): Promise<Map<string, number>>;
  /** Writes a registration and announces it. */
  saveRegistration(write: RegistrationWrite): Promise<void>;
  updateDeployment(write: DeploymentUpdateWrite): Promise<void>;
  /** Removes the deployment and the service revisions it registered; false when it did not exist. */
  deleteDeployment(id: string): Promise<boolean>;
  /**
   * Points each named service at the highest revision some deployment still registers, or removes it when none
   * does. Overrides survive only when the service keeps its revision and deployment and is not in `resetOverrides`
   * (settings changed through the admin API belong to one revision).
   */
  refreshServices(names: readonly string[], resetOverrides: ReadonlySet<string>): Promise<void>;
  /** Replaces the admin API settings of the latest revision of a service; false when the service does not exist. */
  setServiceOverrides(name: string, overrides: ServiceOverrides): Promise<boolean>;
  /** Invocations not completed yet that are pinned to the deployment: how many, and the ids of the oldest few. */
  pinnedInvocations(deploymentId: string, sample: number): Promise<{ count: number; sample: string[] }>;

  kafkaCluster(name: string): Promise<KafkaClusterSchema | undefined>;
  insertKafkaCluster(cluster: KafkaClusterSchema): Promise<void>;
  updateKafkaClusterProperties(name: string, properties: Record<string, string>): Promise<void>;
  deleteKafkaCluster(name: string): Promise<boolean>;
  subscriptionsOfCluster(name: string): Promise<SubscriptionSchema[]>;
  insertSubscription(subscription: SubscriptionSchema): Promise<void>;
  deleteSubscription(id: string): Promise<boolean>;

  /** NOTIFY every runtime process (delivered on commit, dropped on rollback). */
  announce(): Promise<void>;
}

export interface SchemaChangeSubscription {
  close(): Promise<void>;
}

export interface SchemaStore {
  load(): Promise<SchemaRows>;
  /** Runs `fn` in a transaction holding the schema lock; commits when it returns, rolls back when it throws. */
  transaction<T>(fn: (tx: SchemaTransaction) => Promise<T>): Promise<T>;
  /** Calls `onChange` whenever any process commits a schema change (PostgreSQL LISTEN/NOTIFY). */
  subscribe(onChange: () => void, onError: (err: unknown) => void): Promise<SchemaChangeSubscription>;
}
