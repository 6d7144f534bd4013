import { SubscriptionId } from '../ids/deployment-id.ts';
import { InvalidSubscriptionError, SchemaNotFoundError } from './errors.ts';
import { commitSchemaChange, type SchemaOperationDeps } from './operation-deps.ts';
import type { SchemaTransaction } from './store.ts';
import type { HandlerSchema, KafkaClusterSchema, ServiceSchema, SubscriptionSchema } from './types.ts';

/**
 * Kafka subscriptions (`/subscriptions`): records of a topic become invocations of a handler. Only the registry is
 * kept here; every node's consumers follow it (`kafka/`). Every reason a subscription cannot work is META0009 (400), the
 * message naming the problem, checked in restate's order: the source URI, the sink URI, the sink handler, then the
 * cluster. Where restate-server 1.7.12 differs, the specification and META0009's page win:
 *
 * - an unknown cluster is META0009 (restate answers 400 without a code);
 * - a malformed URI is META0009 (restate rejects some with a 422 text body);
 * - the topic must be a legal Kafka topic name (restate accepts an empty one, which no consumer can read).
 *
 * Any handler may be a sink, as in restate: for a virtual object or a workflow the record key is the object or
 * workflow key; an exclusive handler handles the records of one key in order, shared and service handlers in
 * parallel, and a workflow's run once per key (a repeated key joins the first run).
 *
 * Private services (`public: false`) are accepted: Kafka is not the ingress. `group.id` defaults to the
 * subscription id and `client.id` to `restate` (kept from restate-server so broker-side ACLs and quotas written for
 * it still apply), unless the request's options or the cluster's properties set them.
 */

export type CreateSubscription = (
  source: string,
  sink: string,
  options: Record<string, string>,
) => Promise<SubscriptionSchema>;
export type DeleteSubscription = (id: string) => Promise<void>;

/** What a subscription's consumer would be called by default; see above. */
export const DEFAULT_KAFKA_CLIENT_ID = 'restate';

/** Kafka's own rule for topic names. */
const TOPIC_NAME = /^[A-Za-z0-9._-]{1,249}$/;
const SCHEME = /^([A-Za-z][A-Za-z0-9+.-]*):/;
const UNPRINTABLE = /[\s\u0000-\u001f\u007f]/;

interface ParsedUri {
  scheme: string | undefined;
  /** undefined when the URI has no `//authority`; may be empty. */
  authority: string | undefined;
  /** After the `/` that ends the authority; undefined when there is none. */
  path: string | undefined;
}

function parseUri(uri: string): ParsedUri {
  const scheme = SCHEME.exec(uri)?.[1];
  if (scheme === undefined) return { scheme, authority: undefined, path: undefined };
  const rest = uri.slice(scheme.length + 1);
  if (!rest.startsWith('//')) return { scheme, authority: undefined, path: undefined };
  const afterSlashes = rest.slice(2);
  const slash = afterSlashes.indexOf('/');
  if (slash < 0) return { scheme, authority: afterSlashes, path: undefined };
  return { scheme, authority: afterSlashes.slice(0, slash), path: afterSlashes.slice(slash + 1) };
}

function invalid(kind: 'source' | 'sink', uri: string, problem: string): InvalidSubscriptionError {
  return new InvalidSubscriptionError(`invalid ${kind} URI '${uri}': ${problem}`);
}

export interface ParsedSource {
  cluster: string;
  topic: string;
}

export function parseSource(source: string): ParsedSource {
  if (UNPRINTABLE.test(source)) throw invalid('source', source, 'it contains whitespace or control characters.');
  const uri = parseUri(source);
  if (uri.scheme !== 'kafka') {
    throw invalid('source', source, 'must have a scheme segment, with supported schemes: [kafka].');
  }
  if (uri.authority === undefined || uri.authority === '') {
    throw invalid(
      'source',
      source,
      'source URI of Kafka type must have a authority segment containing the cluster name.',
    );
  }
  const topic = uri.path ?? '';
  if (topic === '') {
    throw invalid('source', source, 'the topic name is missing, expected kafka://<CLUSTER_NAME>/<TOPIC_NAME>.');
  }
  if (!TOPIC_NAME.test(topic) || topic === '.' || topic === '..') {
    throw invalid(
      'source',
      source,
      `'${topic}' is not a valid Kafka topic name: use 1 to 249 letters, digits, '.', '_' or '-'.`,
    );
  }
  return { cluster: uri.authority, topic };
}

export interface ParsedSink {
  service: string;
  handler: string;
}

export function parseSink(sink: string): ParsedSink {
  if (UNPRINTABLE.test(sink)) throw invalid('sink', sink, 'it contains whitespace or control characters.');
  const uri = parseUri(sink);
  if (uri.scheme !== 'service') {
    throw invalid('sink', sink, 'must have a scheme segment, with supported schemes: [service].');
  }
  if (uri.authority === undefined || uri.authority === '') {
    throw invalid('sink', sink, 'sink URI of service type must have a authority segment containing the service name.');
  }
  return { service: uri.authority, handler: uri.path ?? '' };
}

async function findSinkHandler(
  tx: SchemaTransaction,
  sink: ParsedSink,
): Promise<{ service: ServiceSchema; handler: HandlerSchema } | undefined> {
  const latest = (await tx.latestServices([sink.service])).get(sink.service);
  if (latest === undefined) return undefined;
  const deployment = await tx.deployment(latest.deploymentId);
  if (deployment === undefined) return undefined;
  const service = (await tx.revisionsOf(deployment)).find((s) => s.name === sink.service);
  const handler = service?.handlers.find((h) => h.name === sink.handler);
  return service === undefined || handler === undefined ? undefined : { service, handler };
}

function consumerOptions(
  id: string,
  options: Record<string, string>,
  cluster: KafkaClusterSchema,
): Record<string, string> {
  const out = { ...options };
  // restate takes the cluster's group.id into the options when the request has none.
  out['group.id'] ??= cluster.properties['group.id'] ?? id;
  if (out['client.id'] === undefined && cluster.properties['client.id'] === undefined) {
    out['client.id'] = DEFAULT_KAFKA_CLIENT_ID;
  }
  return out;
}

export function createCreateSubscription(deps: SchemaOperationDeps): CreateSubscription {
  const log = deps.logger.child({ component: 'admin' });
  return async (source, sink, options) => {
    const from = parseSource(source);
    const to = parseSink(sink);
    const created = await commitSchemaChange(
      deps,
      async (tx) => {
        const target = await findSinkHandler(tx, to);
        if (target === undefined) throw invalid('sink', sink, 'cannot find service/handler specified in the sink URI.');
        const cluster =
          deps.registry.staticKafkaClusters.find((c) => c.name === from.cluster) ??
          (await tx.kafkaCluster(from.cluster));
        if (cluster === undefined) {
          const available = deps.registry.kafkaClusters().map((c) => JSON.stringify(c.name));
          throw new InvalidSubscriptionError(
            `Kafka cluster '${from.cluster}' not found. Available clusters: [${available.join(', ')}]`,
          );
        }
        const now = deps.now();
        const id = SubscriptionId.generate(now.getTime());
        const subscription: SubscriptionSchema = {
          id,
          source: `kafka://${from.cluster}/${from.topic}`,
          sink: `service://${to.service}/${to.handler}`,
          cluster: from.cluster,
          topic: from.topic,
          serviceName: to.service,
          handlerName: to.handler,
          options: consumerOptions(id, options, cluster),
          createdAt: now,
        };
        await tx.insertSubscription(subscription);
        return subscription;
      },
      (subscription) =>
        log.info(
          { 'subscription.id': subscription.id, source: subscription.source, sink: subscription.sink },
          'subscription created',
        ),
    );
    return deps.registry.subscription(created.id) ?? created;
  };
}

export function createDeleteSubscription(deps: SchemaOperationDeps): DeleteSubscription {
  const log = deps.logger.child({ component: 'admin' });
  return async (id) => {
    await commitSchemaChange(
      deps,
      async (tx) => {
        if (!(await tx.deleteSubscription(id))) throw new SchemaNotFoundError(`subscription with id '${id}'`);
      },
      () => log.info({ 'subscription.id': id }, 'subscription deleted'),
    );
  };
}
