import type { InvokerConfig, KafkaConfig, RetryPolicyConfig, ServiceDefaultsConfig } from '../config/config.ts';
import type { SchemaChangeSubscription, SchemaRows, SchemaStore } from './store.ts';
import type {
  ActiveService,
  DeploymentSchema,
  KafkaClusterSchema,
  ServiceDefaults,
  ServiceSchema,
  SubscriptionSchema,
} from './types.ts';

/**
 * The in-memory view of every deployment, service, Kafka cluster and subscription, read synchronously on the hot path
 * (ingress routing, the engine pinning a deployment). It is replaced as a whole after each change made in this
 * process (`load()`), and after changes made in other processes once `watch()` runs.
 */

export function serviceDefaultsFromConfig(
  serviceDefaults: ServiceDefaultsConfig,
  retryPolicy: RetryPolicyConfig,
  invoker: Pick<InvokerConfig, 'inactivityTimeoutMs' | 'abortTimeoutMs'>,
): ServiceDefaults {
  return {
    idempotencyRetentionMs: serviceDefaults.idempotencyRetentionMs,
    journalRetentionMs: serviceDefaults.journalRetentionMs,
    maxJournalRetentionMs: serviceDefaults.maxJournalRetentionMs,
    workflowCompletionRetentionMs: serviceDefaults.workflowCompletionRetentionMs,
    inactivityTimeoutMs: invoker.inactivityTimeoutMs,
    abortTimeoutMs: invoker.abortTimeoutMs,
    retryPolicy: {
      initialIntervalMs: retryPolicy.initialIntervalMs,
      exponentiationFactor: retryPolicy.exponentiationFactor,
      maxAttempts: retryPolicy.maxAttempts,
      maxIntervalMs: retryPolicy.maxIntervalMs,
      onMaxAttempts: retryPolicy.onMaxAttempts === 'kill' ? 'Kill' : 'Pause',
    },
  };
}

/**
 * restate-server's invoker defaults, used only when a caller does not pass the invoker section of the config (which
 * it should: the admin API shows these values as the services' timeouts).
 */
const RESTATE_INVOKER_TIMEOUTS = { inactivityTimeoutMs: 60_000, abortTimeoutMs: 600_000 } as const;

interface Snapshot {
  readonly deployments: ReadonlyMap<string, DeploymentSchema>;
  readonly services: ReadonlyMap<string, ActiveService>;
  /** Key: `${name}\n${revision}` (a newline cannot appear in a service name). */
  readonly revisions: ReadonlyMap<string, ServiceSchema>;
  /** Registered clusters (oldest first), then the configuration file's. */
  readonly kafkaClusters: ReadonlyMap<string, KafkaClusterSchema>;
  /** Oldest first. */
  readonly subscriptions: ReadonlyMap<string, SubscriptionSchema>;
}

const EMPTY: Snapshot = {
  deployments: new Map(),
  services: new Map(),
  revisions: new Map(),
  kafkaClusters: new Map(),
  subscriptions: new Map(),
};

/** Clusters of the configuration file have no creation time; restate shows them as created at the epoch. */
const STATIC_CLUSTER_CREATED_AT = new Date(0);

function revisionKey(name: string, revision: number): string {
  return `${name}\n${revision}`;
}

function buildSnapshot(rows: SchemaRows, staticClusters: readonly KafkaClusterSchema[]): Snapshot {
  const revisions = new Map(rows.revisions.map((r) => [revisionKey(r.name, r.revision), r.schema]));
  const services = new Map<string, ActiveService>();
  for (const s of rows.services) {
    const schema = revisions.get(revisionKey(s.name, s.revision));
    // A service row always points at a revision its deployment lists; if not, the rows are inconsistent and the
    // service is not served rather than served with a wrong schema.
    if (schema === undefined) continue;
    services.set(s.name, { schema, revision: s.revision, deploymentId: s.deploymentId, overrides: s.overrides });
  }
  return {
    deployments: new Map(rows.deployments.map((d) => [d.id, d])),
    services: new Map([...services.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))),
    revisions,
    kafkaClusters: new Map([...rows.kafkaClusters, ...staticClusters].map((c) => [c.name, c])),
    subscriptions: new Map(rows.subscriptions.map((s) => [s.id, s])),
  };
}

export type SchemaChangeListener = () => void;

export class SchemaRegistry {
  readonly store: SchemaStore;
  readonly defaults: ServiceDefaults;
  /** Kafka clusters of the configuration file: always present, never stored, read-only. */
  readonly staticKafkaClusters: readonly KafkaClusterSchema[];
  private snapshot: Snapshot = EMPTY;
  private readonly listeners = new Set<SchemaChangeListener>();
  /** Loads run one after another, so an older read can never replace a newer one. */
  private loading: Promise<void> = Promise.resolve();

  /**
   * `store` holds the schema tables (`PgSchemaStore` in the runtime, handed in by the composition root); the other
   * arguments are the config sections that give services their defaults.
   */
  constructor(
    store: SchemaStore,
    serviceDefaults: ServiceDefaultsConfig,
    retryPolicy: RetryPolicyConfig,
    invoker: Pick<InvokerConfig, 'inactivityTimeoutMs' | 'abortTimeoutMs'> = RESTATE_INVOKER_TIMEOUTS,
    kafka: Pick<KafkaConfig, 'clusters'> = { clusters: [] },
  ) {
    this.store = store;
    this.defaults = serviceDefaultsFromConfig(serviceDefaults, retryPolicy, invoker);
    this.staticKafkaClusters = kafka.clusters.map((c) => ({
      name: c.name,
      properties: { ...c.properties },
      createdAt: STATIC_CLUSTER_CREATED_AT,
      static: true,
    }));
  }

  /** (Re)reads every deployment and service from storage and swaps the view; listeners run afterwards. */
  load(): Promise<void> {
    const next = this.loading.then(async () => {
      this.snapshot = buildSnapshot(await this.store.load(), this.staticKafkaClusters);
      for (const listener of this.listeners) {
        try {
          listener();
        } catch {
          // A listener's failure is its own business; the registry stays consistent.
        }
      }
    });
    // The chain continues after a failed load; the caller of this load still sees its error.
    this.loading = next.catch(() => undefined);
    return next;
  }

  /** The latest revision of a service, or undefined when no deployment exposes it. */
  service(name: string): ActiveService | undefined {
    return this.snapshot.services.get(name);
  }

  /** Sorted by name. */
  services(): ActiveService[] {
    return [...this.snapshot.services.values()];
  }

  deployment(id: string): DeploymentSchema | undefined {
    return this.snapshot.deployments.get(id);
  }

  /** Oldest first. */
  deployments(): DeploymentSchema[] {
    return [...this.snapshot.deployments.values()];
  }

  /** A revision some deployment still lists (older revisions are not kept in memory). */
  serviceRevision(name: string, revision: number): ServiceSchema | undefined {
    return this.snapshot.revisions.get(revisionKey(name, revision));
  }

  /**
   * The services of a deployment as it registered them, each as an ActiveService of its own revision (settings
   * changed through the admin API apply only while that revision is the latest).
   */
  deploymentServices(deployment: DeploymentSchema): ActiveService[] {
    return deployment.services.flatMap(({ name, revision }) => {
      const schema = this.serviceRevision(name, revision);
      if (schema === undefined) return [];
      const latest = this.service(name);
      const overrides = latest !== undefined && latest.revision === revision ? latest.overrides : {};
      return [{ schema, revision, deploymentId: deployment.id, overrides }];
    });
  }

  kafkaCluster(name: string): KafkaClusterSchema | undefined {
    return this.snapshot.kafkaClusters.get(name);
  }

  /** Registered clusters (oldest first), then those of the configuration file. */
  kafkaClusters(): KafkaClusterSchema[] {
    return [...this.snapshot.kafkaClusters.values()];
  }

  subscription(id: string): SubscriptionSchema | undefined {
    return this.snapshot.subscriptions.get(id);
  }

  /** Oldest first. */
  subscriptions(): SubscriptionSchema[] {
    return [...this.snapshot.subscriptions.values()];
  }

  /** Runs `listener` after every reload; returns the function that unsubscribes it. */
  onChange(listener: SchemaChangeListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Follows registrations made by other runtime processes (NOTIFY on commit). Reloads after every notification,
   * and once right after subscribing so nothing committed in between is missed. Returns the subscription to close.
   */
  async watch(onError: (err: unknown) => void): Promise<SchemaChangeSubscription> {
    const reload = (): void => {
      this.load().catch(onError);
    };
    const subscription = await this.store.subscribe(reload, onError);
    reload();
    return subscription;
  }
}
