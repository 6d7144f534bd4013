import type pg from 'pg';
import type {
  DeploymentUpdateWrite,
  RegistrationWrite,
  SchemaChangeSubscription,
  SchemaRows,
  SchemaStore,
  SchemaTransaction,
  StoredRevision,
  StoredService,
} from '../../../schema/store.ts';
import type {
  DeploymentEndpoint,
  DeploymentSchema,
  HandlerSchema,
  KafkaClusterSchema,
  ProtocolType,
  ServiceOverrides,
  ServiceSchema,
  ServiceType,
  SubscriptionSchema,
} from '../../../schema/types.ts';
import { checkDeploymentRow, checkRevisionRow } from './schema-checks.ts';
import * as kafka from './subscriptions.ts';

/**
 * `ratchet.deployment`, `ratchet.service_revision` and `ratchet.service` (plus the Kafka tables of
 * `subscriptions.ts`). Schema changes are rare and small; every one runs in a single transaction under an advisory
 * lock, and announces itself with NOTIFY so that the schema registry of every runtime process reloads.
 */

/** Any fixed 64-bit key, shared by every Ratchet process on the database; distinct from the migration lock. */
const SCHEMA_LOCK_KEY = '7308432957233170002';
export const SCHEMA_CHANGED_CHANNEL = 'ratchet_schema_changed';

interface DeploymentRow {
  id: string;
  uri: string | null;
  arn: string | null;
  assume_role_arn: string | null;
  protocol_type: string;
  http_version: string | null;
  additional_headers: Record<string, string>;
  metadata: Record<string, string>;
  min_protocol_version: number;
  max_protocol_version: number;
  sdk_version: string | null;
  services: { name: string; revision: number }[];
  created_at: Date;
}

interface RevisionRow {
  name: string;
  revision: number;
  deployment_id: string;
  metadata: StoredServiceSchema;
}

interface ServiceRow {
  name: string;
  revision: number;
  deployment_id: string;
  ty: string;
  overrides: ServiceOverrides;
}

const DEPLOYMENT_COLUMNS = `id, uri, arn, assume_role_arn, protocol_type, http_version, additional_headers, metadata, min_protocol_version,
  max_protocol_version, sdk_version, services, created_at`;

function toDeployment(row: DeploymentRow): DeploymentSchema {
  checkDeploymentRow(row);
  const deployment: DeploymentSchema = {
    id: row.id,
    endpoint: toEndpoint(row),
    protocolType: row.protocol_type as ProtocolType,
    additionalHeaders: row.additional_headers,
    metadata: row.metadata,
    minProtocolVersion: row.min_protocol_version,
    maxProtocolVersion: row.max_protocol_version,
    createdAt: row.created_at,
    services: row.services,
  };
  if (row.sdk_version !== null) deployment.sdkVersion = row.sdk_version;
  return deployment;
}

function toEndpoint(row: DeploymentRow): DeploymentEndpoint {
  if (row.arn !== null) {
    return {
      kind: 'lambda',
      arn: row.arn,
      ...(row.assume_role_arn === null ? {} : { assumeRoleArn: row.assume_role_arn }),
    };
  }
  return { kind: 'http', uri: row.uri ?? '', httpVersion: row.http_version === 'HTTP/1.1' ? 'HTTP/1.1' : 'HTTP/2.0' };
}

/** The endpoint's columns: uri, arn, assume_role_arn, http_version. */
function endpointColumns(endpoint: DeploymentEndpoint): [string | null, string | null, string | null, string | null] {
  return endpoint.kind === 'http'
    ? [endpoint.uri, null, null, endpoint.httpVersion]
    : [null, endpoint.arn, endpoint.assumeRoleArn ?? null, null];
}

function toService(row: ServiceRow): StoredService {
  return {
    name: row.name,
    revision: row.revision,
    deploymentId: row.deployment_id,
    ty: row.ty as ServiceType,
    overrides: row.overrides,
  };
}

/*
 * JSON schemas of handler inputs and outputs are echoed back by the admin API. jsonb reorders object keys, so they
 * are stored as JSON text inside the jsonb document to come back exactly as the SDK sent them.
 */
type StoredHandlerSchema = Omit<HandlerSchema, 'input' | 'output'> & {
  input: Omit<HandlerSchema['input'], 'jsonSchema'> & { jsonSchemaText?: string };
  output: Omit<HandlerSchema['output'], 'jsonSchema'> & { jsonSchemaText?: string };
};
type StoredServiceSchema = Omit<ServiceSchema, 'handlers'> & { handlers: StoredHandlerSchema[] };

function encodeSchema(schema: ServiceSchema): StoredServiceSchema {
  return {
    ...schema,
    handlers: schema.handlers.map((h) => {
      const { jsonSchema: inputSchema, ...input } = h.input;
      const { jsonSchema: outputSchema, ...output } = h.output;
      return {
        ...h,
        input: inputSchema === undefined ? input : { ...input, jsonSchemaText: JSON.stringify(inputSchema) },
        output: outputSchema === undefined ? output : { ...output, jsonSchemaText: JSON.stringify(outputSchema) },
      };
    }),
  };
}

function decodeSchema(stored: StoredServiceSchema): ServiceSchema {
  return {
    ...stored,
    handlers: stored.handlers.map((h) => {
      const { jsonSchemaText: inputText, ...input } = h.input;
      const { jsonSchemaText: outputText, ...output } = h.output;
      return {
        ...h,
        input: inputText === undefined ? input : { ...input, jsonSchema: JSON.parse(inputText) as unknown },
        output: outputText === undefined ? output : { ...output, jsonSchema: JSON.parse(outputText) as unknown },
      };
    }),
  };
}

function decodeRevision(row: RevisionRow): ServiceSchema {
  checkRevisionRow(row.name, row.revision, row.metadata);
  return decodeSchema(row.metadata);
}

class PgSchemaTransaction implements SchemaTransaction {
  constructor(private readonly client: pg.ClientBase) {}

  async deploymentsAt(endpoint: DeploymentEndpoint): Promise<DeploymentSchema[]> {
    const column = endpoint.kind === 'http' ? 'uri' : 'arn';
    const res = await this.client.query<DeploymentRow>(
      `SELECT ${DEPLOYMENT_COLUMNS} FROM ratchet.deployment WHERE ${column} = $1 ORDER BY created_at, id`,
      [endpoint.kind === 'http' ? endpoint.uri : endpoint.arn],
    );
    return res.rows.map(toDeployment);
  }

  async revisionsOf(deployment: DeploymentSchema): Promise<ServiceSchema[]> {
    if (deployment.services.length === 0) return [];
    const res = await this.client.query<RevisionRow>(
      `SELECT r.name, r.revision, r.deployment_id, r.metadata
       FROM ratchet.service_revision r
       JOIN unnest($1::text[], $2::int[]) AS s(name, revision) ON r.name = s.name AND r.revision = s.revision`,
      [deployment.services.map((s) => s.name), deployment.services.map((s) => s.revision)],
    );
    const byName = new Map(res.rows.map((r) => [r.name, decodeRevision(r)]));
    return deployment.services.flatMap((s) => {
      const schema = byName.get(s.name);
      return schema === undefined ? [] : [schema];
    });
  }

  async latestServices(names: readonly string[]): Promise<Map<string, StoredService>> {
    const res = await this.client.query<ServiceRow>(
      `SELECT name, revision, deployment_id, ty, overrides FROM ratchet.service WHERE name = ANY($1::text[])`,
      [names],
    );
    return new Map(res.rows.map((r) => [r.name, toService(r)]));
  }

  async saveRegistration(write: RegistrationWrite): Promise<void> {
    const d = write.deployment;
    const values = [
      d.id,
      ...endpointColumns(d.endpoint),
      d.protocolType,
      JSON.stringify(d.additionalHeaders),
      JSON.stringify(d.metadata),
      d.minProtocolVersion,
      d.maxProtocolVersion,
      d.sdkVersion ?? null,
      JSON.stringify(write.manifest),
      JSON.stringify(d.services),
      d.createdAt,
    ];
    if (write.overwrite) {
      await this.client.query(
        `UPDATE ratchet.deployment SET uri = $2, arn = $3, assume_role_arn = $4, http_version = $5,
           protocol_type = $6, additional_headers = $7::jsonb, metadata = $8::jsonb, min_protocol_version = $9,
           max_protocol_version = $10, sdk_version = $11, manifest = $12::jsonb, services = $13::jsonb,
           created_at = $14
         WHERE id = $1`,
        values,
      );
    } else {
      await this.client.query(
        `INSERT INTO ratchet.deployment (id, uri, arn, assume_role_arn, http_version, protocol_type,
           additional_headers, metadata, min_protocol_version, max_protocol_version, sdk_version, manifest, services,
           created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8::jsonb, $9, $10, $11, $12::jsonb, $13::jsonb, $14)`,
        values,
      );
    }
    await this.saveRevisions(d.id, write.revisions);
    if (write.revisions.length > 0) {
      // A new revision starts from its manifest: settings changed through the admin API do not carry over.
      await this.client.query(
        `INSERT INTO ratchet.service (name, revision, deployment_id, ty, overrides)
         SELECT name, revision, $3, ty, '{}'::jsonb FROM unnest($1::text[], $2::int[], $4::text[]) AS s(name, revision, ty)
         ON CONFLICT (name) DO UPDATE SET revision = EXCLUDED.revision, deployment_id = EXCLUDED.deployment_id,
           ty = EXCLUDED.ty, overrides = EXCLUDED.overrides`,
        [
          write.revisions.map((r) => r.schema.name),
          write.revisions.map((r) => r.revision),
          d.id,
          write.revisions.map((r) => r.schema.ty),
        ],
      );
    }
    if (write.removedServices.length > 0) {
      await this.client.query(`DELETE FROM ratchet.service WHERE name = ANY($1::text[]) AND deployment_id = $2`, [
        write.removedServices,
        d.id,
      ]);
    }
    await this.client.query(`SELECT pg_notify($1, $2)`, [SCHEMA_CHANGED_CHANNEL, d.id]);
  }

  async deployment(id: string): Promise<DeploymentSchema | undefined> {
    const res = await this.client.query<DeploymentRow>(
      `SELECT ${DEPLOYMENT_COLUMNS} FROM ratchet.deployment WHERE id = $1`,
      [id],
    );
    const row = res.rows[0];
    return row === undefined ? undefined : toDeployment(row);
  }

  async highestRevisions(names: readonly string[]): Promise<Map<string, number>> {
    const res = await this.client.query<{ name: string; revision: number }>(
      `SELECT s.name, max(s.revision)::int AS revision
       FROM ratchet.deployment d, jsonb_to_recordset(d.services) AS s(name text, revision int)
       WHERE s.name = ANY($1::text[]) GROUP BY s.name`,
      [names],
    );
    return new Map(res.rows.map((r) => [r.name, r.revision]));
  }

  async updateDeployment(write: DeploymentUpdateWrite): Promise<void> {
    const d = write.deployment;
    await this.client.query(
      `UPDATE ratchet.deployment SET uri = $2, arn = $3, assume_role_arn = $4, http_version = $5,
         protocol_type = $6, additional_headers = $7::jsonb, min_protocol_version = $8, max_protocol_version = $9,
         sdk_version = $10, services = $11::jsonb, manifest = COALESCE($12::jsonb, manifest)
       WHERE id = $1`,
      [
        d.id,
        ...endpointColumns(d.endpoint),
        d.protocolType,
        JSON.stringify(d.additionalHeaders),
        d.minProtocolVersion,
        d.maxProtocolVersion,
        d.sdkVersion ?? null,
        JSON.stringify(d.services),
        write.manifest === undefined ? null : JSON.stringify(write.manifest),
      ],
    );
    await this.saveRevisions(d.id, write.revisions);
  }

  /**
   * Stores the service revisions a deployment (re)registered. A revision number can come back after its service was
   * removed (restate restarts at the last live revision + 1); the row left from before is replaced.
   */
  private async saveRevisions(deploymentId: string, revisions: DeploymentUpdateWrite['revisions']): Promise<void> {
    if (revisions.length === 0) return;
    await this.client.query(
      `INSERT INTO ratchet.service_revision (name, revision, deployment_id, metadata)
       SELECT * FROM unnest($1::text[], $2::int[], $3::text[], $4::jsonb[])
       ON CONFLICT (name, revision) DO UPDATE SET deployment_id = EXCLUDED.deployment_id, metadata = EXCLUDED.metadata`,
      [
        revisions.map((r) => r.schema.name),
        revisions.map((r) => r.revision),
        revisions.map(() => deploymentId),
        revisions.map((r) => JSON.stringify(encodeSchema(r.schema))),
      ],
    );
  }

  async deleteDeployment(id: string): Promise<boolean> {
    const res = await this.client.query('DELETE FROM ratchet.deployment WHERE id = $1', [id]);
    if ((res.rowCount ?? 0) === 0) return false;
    await this.client.query('DELETE FROM ratchet.service_revision WHERE deployment_id = $1', [id]);
    return true;
  }

  async refreshServices(names: readonly string[], resetOverrides: ReadonlySet<string>): Promise<void> {
    if (names.length === 0) return;
    const best = await this.client.query<{ name: string; revision: number; deployment_id: string; ty: string }>(
      `SELECT DISTINCT ON (s.name) s.name, s.revision, d.id AS deployment_id, r.metadata->>'ty' AS ty
       FROM ratchet.deployment d
       CROSS JOIN jsonb_to_recordset(d.services) AS s(name text, revision int)
       JOIN ratchet.service_revision r ON r.name = s.name AND r.revision = s.revision
       WHERE s.name = ANY($1::text[])
       ORDER BY s.name, s.revision DESC`,
      [names],
    );
    const current = await this.latestServices(names);
    const found = new Set<string>();
    for (const row of best.rows) {
      found.add(row.name);
      const previous = current.get(row.name);
      const keep =
        previous !== undefined &&
        previous.revision === row.revision &&
        previous.deploymentId === row.deployment_id &&
        !resetOverrides.has(row.name);
      await this.client.query(
        `INSERT INTO ratchet.service (name, revision, deployment_id, ty, overrides) VALUES ($1, $2, $3, $4, $5::jsonb)
         ON CONFLICT (name) DO UPDATE SET revision = EXCLUDED.revision, deployment_id = EXCLUDED.deployment_id,
           ty = EXCLUDED.ty, overrides = EXCLUDED.overrides`,
        [row.name, row.revision, row.deployment_id, row.ty, JSON.stringify(keep ? previous.overrides : {})],
      );
    }
    const gone = names.filter((n) => !found.has(n));
    if (gone.length > 0) {
      await this.client.query('DELETE FROM ratchet.service WHERE name = ANY($1::text[])', [gone]);
    }
  }

  async setServiceOverrides(name: string, overrides: ServiceOverrides): Promise<boolean> {
    const res = await this.client.query('UPDATE ratchet.service SET overrides = $2::jsonb WHERE name = $1', [
      name,
      JSON.stringify(overrides),
    ]);
    return (res.rowCount ?? 0) > 0;
  }

  async pinnedInvocations(deploymentId: string, sample: number): Promise<{ count: number; sample: string[] }> {
    const res = await this.client.query<{ count: string }>(
      `SELECT count(*)::text AS count FROM ratchet.invocation WHERE deployment_id = $1 AND status <> 'completed'`,
      [deploymentId],
    );
    const count = Number(res.rows[0]?.count ?? '0');
    if (count === 0 || sample <= 0) return { count, sample: [] };
    const ids = await this.client.query<{ id: string }>(
      `SELECT id FROM ratchet.invocation WHERE deployment_id = $1 AND status <> 'completed'
       ORDER BY created_at, id LIMIT $2`,
      [deploymentId, sample],
    );
    return { count, sample: ids.rows.map((r) => r.id) };
  }

  kafkaCluster(name: string): Promise<KafkaClusterSchema | undefined> {
    return kafka.findKafkaCluster(this.client, name);
  }

  insertKafkaCluster(cluster: KafkaClusterSchema): Promise<void> {
    return kafka.insertKafkaCluster(this.client, cluster);
  }

  updateKafkaClusterProperties(name: string, properties: Record<string, string>): Promise<void> {
    return kafka.updateKafkaClusterProperties(this.client, name, properties);
  }

  deleteKafkaCluster(name: string): Promise<boolean> {
    return kafka.deleteKafkaCluster(this.client, name);
  }

  subscriptionsOfCluster(name: string): Promise<SubscriptionSchema[]> {
    return kafka.subscriptionsOfCluster(this.client, name);
  }

  insertSubscription(subscription: SubscriptionSchema): Promise<void> {
    return kafka.insertSubscription(this.client, subscription);
  }

  deleteSubscription(id: string): Promise<boolean> {
    return kafka.deleteSubscription(this.client, id);
  }

  async announce(): Promise<void> {
    await this.client.query(`SELECT pg_notify($1, '')`, [SCHEMA_CHANGED_CHANNEL]);
  }
}

export class PgSchemaStore implements SchemaStore {
  constructor(private readonly pool: pg.Pool) {}

  async load(): Promise<SchemaRows> {
    const client = await this.pool.connect();
    try {
      // One snapshot for all reads, so a concurrent registration is seen entirely or not at all.
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      try {
        const deployments = await client.query<DeploymentRow>(
          `SELECT ${DEPLOYMENT_COLUMNS} FROM ratchet.deployment ORDER BY created_at, id`,
        );
        const revisions = await client.query<RevisionRow>(
          `SELECT r.name, r.revision, r.deployment_id, r.metadata
           FROM ratchet.service_revision r
           WHERE EXISTS (
             SELECT 1 FROM ratchet.deployment d, jsonb_to_recordset(d.services) AS s(name text, revision int)
             WHERE d.id = r.deployment_id AND s.name = r.name AND s.revision = r.revision)`,
        );
        const services = await client.query<ServiceRow>(
          `SELECT name, revision, deployment_id, ty, overrides FROM ratchet.service ORDER BY name`,
        );
        const kafkaClusters = await kafka.loadKafkaClusters(client);
        const subscriptions = await kafka.loadSubscriptions(client);
        await client.query('COMMIT');
        return {
          deployments: deployments.rows.map(toDeployment),
          revisions: revisions.rows.map((r): StoredRevision => ({
            name: r.name,
            revision: r.revision,
            deploymentId: r.deployment_id,
            schema: decodeRevision(r),
          })),
          services: services.rows.map(toService),
          kafkaClusters,
          subscriptions,
        };
      } catch (err) {
        await client.query('ROLLBACK');
        throw err;
      }
    } finally {
      client.release();
    }
  }

  async transaction<T>(fn: (tx: SchemaTransaction) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      try {
        await client.query('SELECT pg_advisory_xact_lock($1::bigint)', [SCHEMA_LOCK_KEY]);
        const result = await fn(new PgSchemaTransaction(client));
        await client.query('COMMIT');
        return result;
      } catch (err) {
        await client.query('ROLLBACK');
        throw err;
      }
    } finally {
      client.release();
    }
  }

  async subscribe(onChange: () => void, onError: (err: unknown) => void): Promise<SchemaChangeSubscription> {
    const client = await this.pool.connect();
    let closed = false;
    const onNotification = (msg: pg.Notification): void => {
      if (msg.channel === SCHEMA_CHANGED_CHANNEL) onChange();
    };
    const onClientError = (err: Error): void => {
      if (!closed) onError(err);
    };
    client.on('notification', onNotification);
    client.on('error', onClientError);
    try {
      await client.query(`LISTEN ${SCHEMA_CHANGED_CHANNEL}`);
    } catch (err) {
      client.off('notification', onNotification);
      client.off('error', onClientError);
      client.release(err instanceof Error ? err : true);
      throw err;
    }
    return {
      close() {
        if (!closed) {
          closed = true;
          client.off('notification', onNotification);
          client.off('error', onClientError);
          // A listening connection must not go back to the pool: destroy it instead.
          client.release(true);
        }
        return Promise.resolve();
      },
    };
  }
}
