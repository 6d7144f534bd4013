import type { DeploymentSchema, ServiceOverrides, ServiceSchema, ServiceType } from './types.ts';

/**
 * Storage contract of the schema tables (`ratchet.deployment`, `ratchet.service_revision`, `ratchet.service`).
 * The PostgreSQL implementation is `storage/pg/tables/schema.ts`.
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
export interface SchemaTransaction {
  deploymentsByUri(uri: string): Promise<DeploymentSchema[]>;
  /** The service schemas a deployment registered, in its `services` order. */
  revisionsOf(deployment: DeploymentSchema): Promise<ServiceSchema[]>;
  latestServices(names: readonly string[]): Promise<Map<string, StoredService>>;
  saveRegistration(write: RegistrationWrite): Promise<void>;
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
