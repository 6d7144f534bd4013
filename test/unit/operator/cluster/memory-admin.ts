import {
  AdminApiError,
  type AdminClient,
  type AdminClientFactory,
  type AdminTarget,
  type SimpleKafkaClusterResponse,
  type VersionInformation,
} from '../../../../operator/src/admin-client/types.ts';

/*
 * The admin API of one runtime cluster, in memory: `/version` and `/kafka-clusters` as the runtime answers them
 * (credentials shown as `***`, 409 on a duplicate, 404 on an unknown name), plus switches for an unreachable or
 * token-refusing runtime. Everything else the Cluster controller never calls answers 501.
 */

const SECRET_WORDS = ['password', 'secret', 'passphrase'];
const SECRET_PROPERTIES = new Set(['sasl.username', 'sasl.jaas.config', 'ssl.key.pem']);

function redact(properties: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(properties)) {
    const lower = k.toLowerCase();
    out[k] = SECRET_PROPERTIES.has(lower) || SECRET_WORDS.some((w) => lower.includes(w)) ? '***' : v;
  }
  return out;
}

export class MemoryAdmin {
  /** False: every call fails like a connection refused (status 0). */
  reachable = true;
  /** When set, calls with another bearer token are refused with 401. */
  requiredToken: string | undefined;
  versionInfo: VersionInformation = {
    version: '0.1.0',
    min_admin_api_version: 1,
    max_admin_api_version: 3,
    features: {},
  };
  /** The Kafka clusters the runtime holds (unredacted). */
  readonly kafka = new Map<string, Record<string, string>>();
  /** Every target a client was made for. */
  readonly targets: AdminTarget[] = [];
  /** Every call, as `method name`. */
  readonly calls: string[] = [];

  readonly factory: AdminClientFactory = (target) => {
    this.targets.push(target);
    return this.client(target);
  };

  private guard(target: AdminTarget, call: string): void {
    this.calls.push(call);
    if (!this.reachable) throw new AdminApiError(0, `connect ECONNREFUSED ${target.url}`);
    if (this.requiredToken !== undefined && target.token !== this.requiredToken) {
      throw new AdminApiError(401, 'the bearer token is missing or invalid');
    }
  }

  private client(target: AdminTarget): AdminClient {
    const unsupported = (what: string) => () => Promise.reject(new AdminApiError(501, `${what} is not modelled`));
    return {
      version: () => {
        this.guard(target, 'version');
        return Promise.resolve({ ...this.versionInfo });
      },
      listKafkaClusters: () => {
        this.guard(target, 'listKafkaClusters');
        const list: SimpleKafkaClusterResponse[] = [...this.kafka].map(([name, properties]) => ({
          name,
          properties: redact(properties),
          created_at: '1970-01-01T00:00:00Z',
        }));
        return Promise.resolve(list);
      },
      createKafkaCluster: (cluster) => {
        this.guard(target, `createKafkaCluster ${cluster.name}`);
        if (this.kafka.has(cluster.name)) {
          return Promise.reject(new AdminApiError(409, `kafka cluster '${cluster.name}' already exists`));
        }
        this.kafka.set(cluster.name, { ...cluster.properties });
        return Promise.resolve();
      },
      updateKafkaCluster: (name, properties) => {
        this.guard(target, `updateKafkaCluster ${name}`);
        if (!this.kafka.has(name)) return Promise.reject(new AdminApiError(404, `kafka cluster '${name}' not found`));
        this.kafka.set(name, { ...properties });
        return Promise.resolve();
      },
      deleteKafkaCluster: (name) => {
        this.guard(target, `deleteKafkaCluster ${name}`);
        return Promise.resolve(this.kafka.delete(name));
      },
      registerDeployment: unsupported('registerDeployment'),
      getDeployment: unsupported('getDeployment'),
      listDeployments: unsupported('listDeployments'),
      updateDeployment: unsupported('updateDeployment'),
      deleteDeployment: unsupported('deleteDeployment'),
      listServices: unsupported('listServices'),
      query: unsupported('query'),
      listSubscriptions: unsupported('listSubscriptions'),
      getSubscription: unsupported('getSubscription'),
      subscriptionStatus: unsupported('subscriptionStatus'),
      createSubscription: unsupported('createSubscription'),
      deleteSubscription: unsupported('deleteSubscription'),
    };
  }
}
