import type { Cluster } from '../../api/v1alpha1/index.ts';
import { AdminApiError, type AdminClient, type SimpleKafkaClusterResponse } from '../../admin-client/types.ts';
import type { ReconcileContext } from '../../reconcile/types.ts';
import { digest } from '../../specs/meta.ts';
import { getSecret, type ClusterObject, type SecretData } from './secrets.ts';

/*
 * spec.kafka.clusters → the runtime's `/kafka-clusters`. The admin API shows credentials as `***`, so what was last
 * sent is remembered as a digest per cluster (the record, kept on the runtime ConfigMap): a changed Secret shows as a
 * changed digest. The record's names are also the clusters this operator may delete; others are never touched.
 */

/** How the admin API renders a credential property. */
export const REDACTED = '***';

type KafkaClusterSpec = NonNullable<Cluster['spec']['kafka']>['clusters'][number];

/** The properties sent for one cluster: spec properties, then the Secret's keys, then the brokers of the spec. */
export function kafkaProperties(
  spec: KafkaClusterSpec,
  fromSecret: Readonly<Record<string, string>> = {},
): Record<string, string> {
  return { ...spec.properties, ...fromSecret, 'bootstrap.servers': spec.bootstrapServers.join(',') };
}

/** Whether the admin API's (redacted) view can be `desired`: same keys, equal values except redacted ones. */
export function visiblyEqual(
  shown: Readonly<Record<string, string>>,
  desired: Readonly<Record<string, string>>,
): boolean {
  const a = Object.keys(shown).sort();
  const b = Object.keys(desired).sort();
  if (a.length !== b.length || a.some((k, i) => k !== b[i])) return false;
  return a.every((k) => shown[k] === REDACTED || shown[k] === desired[k]);
}

export interface KafkaSyncResult {
  readonly synced: boolean;
  readonly reason: string;
  readonly message: string;
  /** The record after this sync: name → digest of the properties the runtime has. */
  readonly record: Record<string, string>;
}

function decodeAll(secret: SecretData): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(secret.data ?? {})) out[k] = Buffer.from(v, 'base64').toString('utf8');
  return out;
}

function describe(err: unknown): string {
  return err instanceof AdminApiError
    ? `${err.message}${err.status === 0 ? '' : ` (HTTP ${err.status})`}`
    : String(err);
}

export async function syncKafkaClusters(
  cluster: ClusterObject,
  admin: AdminClient,
  previous: Readonly<Record<string, string>>,
  ctx: ReconcileContext,
): Promise<KafkaSyncResult> {
  const record: Record<string, string> = { ...previous };
  const specs = cluster.spec.kafka?.clusters ?? [];
  const problems: string[] = [];
  let adminFailed = false;
  const desired = new Map<string, Record<string, string>>();
  for (const spec of specs) {
    let fromSecret: Record<string, string> = {};
    if (spec.propertiesFrom !== undefined) {
      const secret = await getSecret(ctx, cluster, spec.propertiesFrom.name);
      if (secret === undefined) {
        problems.push(`kafka cluster ${spec.name}: waiting for Secret ${spec.propertiesFrom.name} (propertiesFrom)`);
        continue;
      }
      fromSecret = decodeAll(secret);
    }
    desired.set(spec.name, kafkaProperties(spec, fromSecret));
  }

  let shown: SimpleKafkaClusterResponse[];
  try {
    shown = await admin.listKafkaClusters();
  } catch (err) {
    return { synced: false, reason: 'AdminAPIError', message: `cannot list Kafka clusters: ${describe(err)}`, record };
  }
  const byName = new Map(shown.map((c) => [c.name, c]));
  const note = (action: string, name: string) =>
    ctx.events.record(cluster, 'Normal', 'KafkaClusterSynced', `${action} Kafka cluster ${name}`, 'SyncKafkaCluster');

  for (const [name, properties] of desired) {
    const hash = digest(properties);
    const current = byName.get(name);
    try {
      if (current === undefined) {
        await admin.createKafkaCluster({ name, properties });
        record[name] = hash;
        await note('created', name);
      } else if (record[name] !== hash || !visiblyEqual(current.properties, properties)) {
        // An unrecorded cluster of the same name is adopted: the spec says what it should be.
        await admin.updateKafkaCluster(name, properties);
        record[name] = hash;
        await note('updated', name);
      }
    } catch (err) {
      adminFailed = true;
      problems.push(`kafka cluster ${name}: ${describe(err)}`);
    }
  }

  const listed = new Set(specs.map((s) => s.name));
  for (const name of Object.keys(record).sort()) {
    if (listed.has(name)) continue;
    try {
      if (byName.has(name)) {
        await admin.deleteKafkaCluster(name);
        await note('deleted', name);
      }
      delete record[name];
    } catch (err) {
      adminFailed = true;
      problems.push(`kafka cluster ${name} (no longer in the spec): ${describe(err)}`);
    }
  }

  if (problems.length > 0) {
    return {
      synced: false,
      reason: adminFailed ? 'SyncFailed' : 'SecretNotFound',
      message: problems.join('; '),
      record,
    };
  }
  return {
    synced: true,
    reason: 'Synced',
    message: `${desired.size} Kafka cluster${desired.size === 1 ? '' : 's'} in sync with the admin API`,
    record,
  };
}
