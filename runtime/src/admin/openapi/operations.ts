import type { TObject, TSchema } from '@sinclair/typebox';
import { ClusterHealthResponse } from '../model/cluster-health.ts';
import {
  InvocationActivityQuery,
  InvocationLogsResponse,
  InvocationTraceResponse,
} from '../model/invocation-activity.ts';
import {
  DeleteDeploymentQuery,
  DetailedDeploymentResponse,
  ListDeploymentsResponse,
  RegisterDeploymentResponse,
  RegisterDeploymentRequest,
  UpdateDeploymentRequest,
} from '../model/deployments.ts';
import {
  DeleteInvocationQuery,
  RestartAsNewInvocationQuery,
  RestartAsNewInvocationResponse,
  ResumeInvocationQuery,
} from '../model/invocations.ts';
import {
  CreateKafkaClusterRequest,
  DeleteKafkaClusterQuery,
  GetKafkaClusterQuery,
  KafkaClusterResponse,
  ListKafkaClustersResponse,
  SimpleKafkaClusterResponse,
  UpdateKafkaClusterRequest,
} from '../model/kafka-clusters.ts';
import { DeleteRuleRequest, RuleResponse, UpsertRuleRequest } from '../model/limits.ts';
import { QueryRequest, QueryResponse } from '../model/query.ts';
import {
  HandlerMetadata,
  ListServiceHandlersResponse,
  ListServicesResponse,
  ModifyServiceRequest,
  ModifyServiceStateRequest,
  ServiceMetadata,
} from '../model/services.ts';
import {
  CreateSubscriptionRequest,
  ListSubscriptionsQuery,
  ListSubscriptionsResponse,
  SubscriptionResponse,
  SubscriptionStatusResponse,
} from '../model/subscriptions.ts';
import { VersionInformation } from '../model/version.ts';

/**
 * What the admin API's OpenAPI document says about each operation, keyed by method and path shape (`{}` for any
 * path parameter, so the description does not depend on how a route names its parameters). The document lists only
 * the routes the app actually registered (see `document.ts`), each described from here; operation ids, tags and
 * body schemas follow restate-server 1.7.12's document. Bodies, answers and query parameters are the admin API
 * model's schemas (`../model/`), the same the routes read requests with.
 */

export type Tag =
  | 'deployment'
  | 'invocation'
  | 'subscription'
  | 'kafka_cluster'
  | 'service'
  | 'service_handler'
  | 'health'
  | 'cluster_health'
  | 'version'
  | 'introspection'
  | 'rule'
  | 'vqueue'
  | 'openapi';

export interface SuccessDoc {
  status: string;
  description: string;
  /** Component of a JSON body; none = empty body. */
  schema?: TSchema;
  /** The body is an array of `schema`. */
  array?: boolean;
  /** The body is an array of strings. */
  stringArray?: boolean;
  headers?: Record<string, { description: string; schema: Record<string, unknown> }>;
}

export interface OperationDoc {
  operationId: string;
  tag: Tag;
  summary: string;
  description: string;
  /** The query parameters, each property one (with its description). */
  query?: TObject;
  /** Component of the JSON request body. */
  body?: TSchema;
  /** The request body is an array of `body`. */
  bodyIsArray?: boolean;
  success: SuccessDoc[];
  /** Error statuses, each described by a shared response (`components.responses`). */
  errors: number[];
}

export const TAGS: { name: Tag; description: string }[] = [
  { name: 'deployment', description: 'Service deployment management' },
  { name: 'invocation', description: 'Invocation management' },
  { name: 'subscription', description: 'Kafka subscription management (registry only: Ratchet does not consume yet)' },
  { name: 'kafka_cluster', description: 'Kafka cluster management' },
  { name: 'service', description: 'Service management' },
  { name: 'service_handler', description: 'Service handlers metadata' },
  { name: 'health', description: 'Admin API health' },
  { name: 'cluster_health', description: 'Cluster health: the runtime nodes and the partitions each one leads' },
  { name: 'version', description: 'API version' },
  { name: 'introspection', description: 'SQL over the introspection tables' },
  { name: 'rule', description: 'Limiter rule book (flow control)' },
  { name: 'vqueue', description: 'Virtual queue management (flow control, experimental)' },
  { name: 'openapi', description: 'This document' },
];

const LOCATION = { location: { description: 'Relative path of the created resource', schema: { type: 'string' } } };
const EXTRACTION = [400, 415, 422];

export const OPERATIONS: Record<string, OperationDoc> = {
  'PUT /limits/rules': {
    operationId: 'upsert_rules',
    tag: 'rule',
    summary: 'Upsert a batch of rules.',
    description:
      'Each entry carries an optional precondition: `does_not_exist` makes it a strict insert, `matches` refuses ' +
      "the batch unless the rule's current version is the one given, none is unconditional. The whole batch is " +
      'atomic: a failed precondition (409) or a bad entry (422) applies nothing. Concurrency limits are enforced ' +
      'while flow control is enabled (`experimental-enable-vqueues`).',
    body: UpsertRuleRequest,
    bodyIsArray: true,
    success: [{ status: '200', description: 'Rules upserted', schema: RuleResponse, array: true }],
    errors: [...EXTRACTION, 409],
  },
  'POST /vqueues/{}/pause': {
    operationId: 'pause_vqueue',
    tag: 'vqueue',
    summary: 'Pauses a virtual queue.',
    description:
      'Nothing of the queue starts until it is resumed (running attempts go on). Stored by the owner of the ' +
      "queue's partition; 202 for any well-formed id. 400 for a malformed id.",
    success: [{ status: '202', description: 'Virtual queue pause accepted' }],
    errors: [400],
  },
  'POST /vqueues/{}/resume': {
    operationId: 'resume_vqueue',
    tag: 'vqueue',
    summary: 'Resumes a virtual queue.',
    description: 'What waited for the queue starts again, within the concurrency limits. 400 for a malformed id.',
    success: [{ status: '202', description: 'Virtual queue resume accepted' }],
    errors: [400],
  },
  'POST /limits/rules/bulk-delete': {
    operationId: 'bulk_delete_rules',
    tag: 'rule',
    summary: 'Delete a batch of rules by pattern.',
    description:
      'An entry with `expected_version` requires the rule at exactly that version, or the batch fails (409); ' +
      'without it the delete is unconditional and an absent pattern is skipped. Answers the patterns removed.',
    body: DeleteRuleRequest,
    bodyIsArray: true,
    success: [{ status: '200', description: 'Patterns that were actually removed', stringArray: true }],
    errors: [...EXTRACTION, 409],
  },
  'POST /query': {
    operationId: 'query',
    tag: 'introspection',
    summary: 'Query the system and service state by using SQL.',
    description:
      'Runs one SQL statement over the introspection tables (sys_invocation, sys_journal, state, …) in PostgreSQL, ' +
      'as a read-only role, under a statement timeout and a row limit. `accept: application/json` answers ' +
      '`{"rows": [...]}`; any other accept an Arrow IPC stream (`application/vnd.apache.arrow.stream`). Errors are ' +
      '`{"message"}`: 400 for a statement PostgreSQL refuses (or one over the timeout or the row limit), 503 when ' +
      'the database cannot be reached.',
    body: QueryRequest,
    success: [{ status: '200', description: 'Query results', schema: QueryResponse }],
    errors: [...EXTRACTION, 503],
  },
  'GET /health': {
    operationId: 'health',
    tag: 'health',
    summary: 'Health check',
    description: 'Answers 200 with an empty body while the admin API is up.',
    success: [{ status: '200', description: 'Healthy' }],
    errors: [],
  },
  'GET /cluster-health': {
    operationId: 'cluster_health',
    tag: 'cluster_health',
    summary: 'Cluster state endpoint',
    description:
      "restate's cluster health (the cluster name and the members, as plain node ids), and Ratchet's `nodes`: every " +
      'runtime process registered in the database with its advertised admin and ingress addresses, whether its ' +
      'heartbeat is fresh, and the partitions it holds a live lease of. Any node answers, from PostgreSQL.',
    success: [{ status: '200', description: 'Cluster health information', schema: ClusterHealthResponse }],
    errors: [503],
  },
  'GET /version': {
    operationId: 'version',
    tag: 'version',
    summary: 'Admin API version',
    description:
      "Ratchet's version and the admin API versions it serves (2 to 4, also as path prefixes `/v2` … `/v4`).",
    success: [{ status: '200', description: 'Version information', schema: VersionInformation }],
    errors: [],
  },
  'GET /openapi': {
    operationId: 'openapi',
    tag: 'openapi',
    summary: 'Admin API OpenAPI document',
    description: 'This document, generated from the routes the admin API serves.',
    success: [{ status: '200', description: 'OpenAPI 3.1 document' }],
    errors: [],
  },
  'GET /deployments': {
    operationId: 'list_deployments',
    tag: 'deployment',
    summary: 'List deployments',
    description: 'Every registered deployment, oldest first.',
    success: [{ status: '200', description: 'Deployments', schema: ListDeploymentsResponse }],
    errors: [],
  },
  'POST /deployments': {
    operationId: 'create_deployment',
    tag: 'deployment',
    summary: 'Create deployment',
    description:
      'Discovers the endpoint and registers the services it exposes. The same uri again answers 200 without ' +
      'change when the endpoint is unchanged (META0004 when it changed); `force` replaces the deployment with that ' +
      'uri (META0017 when several share it); a service changing type is META0006 unless `force` or `breaking`.',
    body: RegisterDeploymentRequest,
    success: [
      { status: '201', description: 'Created', schema: RegisterDeploymentResponse, headers: LOCATION },
      {
        status: '200',
        description: 'Already registered, or overwritten (force)',
        schema: RegisterDeploymentResponse,
      },
    ],
    errors: [...EXTRACTION, 409, 500, 501],
  },
  'GET /deployments/{}': {
    operationId: 'get_deployment',
    tag: 'deployment',
    summary: 'Get deployment',
    description: 'A deployment with the full metadata of the service revisions it registered.',
    success: [{ status: '200', description: 'Deployment', schema: DetailedDeploymentResponse }],
    errors: [400, 404],
  },
  'PATCH /deployments/{}': {
    operationId: 'update_deployment',
    tag: 'deployment',
    summary: 'Update deployment',
    description:
      'Updates a deployment in place (same id): a new uri, headers or transport, e.g. to repair invocations pinned ' +
      'to it. The endpoint is discovered again and must keep exactly the same supported protocol versions, every ' +
      'service with the same type and every handler (META0016). `overwrite` also replaces the stored schemas.',
    body: UpdateDeploymentRequest,
    success: [{ status: '200', description: 'Updated (or, dry run, would be)', schema: DetailedDeploymentResponse }],
    errors: [...EXTRACTION, 404, 500],
  },
  'PUT /deployments/{}': {
    operationId: 'update_deployment_put',
    tag: 'deployment',
    summary: 'Update deployment (PUT)',
    description:
      'Updates a deployment in place, like PATCH (specification 4.3), on the unversioned path and under `/v2`; ' +
      '`/v3` and `/v4` answer 405 ("PUT deployment is deprecated, use PATCH instead"), as restate does.',
    body: UpdateDeploymentRequest,
    success: [{ status: '200', description: 'Updated', schema: DetailedDeploymentResponse }],
    errors: [...EXTRACTION, 404, 405, 500],
  },
  'DELETE /deployments/{}': {
    operationId: 'delete_deployment',
    tag: 'deployment',
    summary: 'Delete deployment',
    description:
      'Only forced deletion exists (501 without `force=true`). Services it served fall back to the highest ' +
      'revision another deployment registers, or disappear. Invocations not completed yet that are pinned to it ' +
      'cannot make progress afterwards: their number is returned in `x-ratchet-pinned-invocations` (and a ' +
      '`warning` header when not zero) and logged.',
    query: DeleteDeploymentQuery,
    success: [
      {
        status: '202',
        description: 'Deleted',
        headers: {
          'x-ratchet-pinned-invocations': {
            description: 'Invocations not completed yet that were pinned to the deployment',
            schema: { type: 'integer', minimum: 0 },
          },
        },
      },
    ],
    errors: [400, 404, 501],
  },
  'GET /services': {
    operationId: 'list_services',
    tag: 'service',
    summary: 'List services',
    description: 'The latest revision of every service, by name.',
    success: [{ status: '200', description: 'Services', schema: ListServicesResponse }],
    errors: [],
  },
  'GET /services/{}': {
    operationId: 'get_service',
    tag: 'service',
    summary: 'Get service',
    description: 'The latest revision of a service, with the settings in effect.',
    success: [{ status: '200', description: 'Service', schema: ServiceMetadata }],
    errors: [404],
  },
  'PATCH /services/{}': {
    operationId: 'modify_service',
    tag: 'service',
    summary: 'Modify service configuration',
    description:
      'Changes settings of the latest revision of a service (a new revision starts from its manifest again).',
    body: ModifyServiceRequest,
    success: [{ status: '200', description: 'Updated service', schema: ServiceMetadata }],
    errors: [...EXTRACTION, 404],
  },
  'POST /services/{}/state': {
    operationId: 'modify_service_state',
    tag: 'service',
    summary: 'Modify a virtual object or workflow state',
    description:
      'Replaces the whole state of one key, after the invocations queued for it. With `version`, only if the state ' +
      'still has that version. Accepted at once (202); applied asynchronously.',
    body: ModifyServiceStateRequest,
    success: [{ status: '202', description: 'Accepted' }],
    errors: [...EXTRACTION, 404],
  },
  'GET /services/{}/openapi': {
    operationId: 'get_service_openapi',
    tag: 'service',
    summary: 'Get service OpenAPI definition',
    description: 'An OpenAPI 3.1 document of the ingress paths of the service, with its handlers’ JSON schemas.',
    success: [{ status: '200', description: 'OpenAPI 3.1 document' }],
    errors: [404],
  },
  'GET /services/{}/handlers': {
    operationId: 'list_service_handlers',
    tag: 'service_handler',
    summary: 'List service handlers',
    description: 'The handlers of the latest revision of a service.',
    success: [{ status: '200', description: 'Handlers', schema: ListServiceHandlersResponse }],
    errors: [404],
  },
  'GET /services/{}/handlers/{}': {
    operationId: 'get_service_handler',
    tag: 'service_handler',
    summary: 'Get service handler',
    description: 'One handler of the latest revision of a service.',
    success: [{ status: '200', description: 'Handler', schema: HandlerMetadata }],
    errors: [404],
  },
  'GET /kafka-clusters': {
    operationId: 'list_kafka_clusters',
    tag: 'kafka_cluster',
    summary: 'List Kafka clusters',
    description: 'Registered clusters, then those of the configuration file (read-only, with an `info` note).',
    success: [{ status: '200', description: 'Clusters', schema: ListKafkaClustersResponse }],
    errors: [],
  },
  'POST /kafka-clusters': {
    operationId: 'create_kafka_cluster',
    tag: 'kafka_cluster',
    summary: 'Create Kafka cluster',
    description: 'Registers a cluster subscriptions can read from. The brokers are not contacted.',
    body: CreateKafkaClusterRequest,
    success: [{ status: '201', description: 'Created', schema: SimpleKafkaClusterResponse, headers: LOCATION }],
    errors: [...EXTRACTION, 409],
  },
  'GET /kafka-clusters/{}': {
    operationId: 'get_kafka_cluster',
    tag: 'kafka_cluster',
    summary: 'Get Kafka cluster',
    description: 'A cluster; credentials in its properties are shown as `***`.',
    query: GetKafkaClusterQuery,
    success: [{ status: '200', description: 'Cluster', schema: KafkaClusterResponse }],
    errors: [400, 404],
  },
  'PATCH /kafka-clusters/{}': {
    operationId: 'update_kafka_cluster',
    tag: 'kafka_cluster',
    summary: 'Update Kafka cluster',
    description: "Replaces a registered cluster's properties (409 for a cluster of the configuration file).",
    body: UpdateKafkaClusterRequest,
    success: [{ status: '200', description: 'Updated', schema: SimpleKafkaClusterResponse }],
    errors: [...EXTRACTION, 404, 409],
  },
  'DELETE /kafka-clusters/{}': {
    operationId: 'delete_kafka_cluster',
    tag: 'kafka_cluster',
    summary: 'Delete Kafka cluster',
    description: 'Refused (409) while subscriptions read from it, unless `force` (they are then orphaned).',
    query: DeleteKafkaClusterQuery,
    success: [{ status: '202', description: 'Deleted' }],
    errors: [400, 404, 409],
  },
  'GET /subscriptions': {
    operationId: 'list_subscriptions',
    tag: 'subscription',
    summary: 'List subscriptions',
    description: 'Every subscription, oldest first, optionally filtered (exact match).',
    query: ListSubscriptionsQuery,
    success: [{ status: '200', description: 'Subscriptions', schema: ListSubscriptionsResponse }],
    errors: [],
  },
  'POST /subscriptions': {
    operationId: 'create_subscription',
    tag: 'subscription',
    summary: 'Create subscription',
    description:
      'Routes records of `kafka://<cluster>/<topic>` to `service://<service>/<handler>`. Every reason it cannot ' +
      'work is META0009 (400): bad URIs, unknown cluster, unregistered sink. Every runtime node starts consuming at ' +
      'once (see `GET /subscriptions/{subscription}/status`).',
    body: CreateSubscriptionRequest,
    success: [{ status: '201', description: 'Created', schema: SubscriptionResponse, headers: LOCATION }],
    errors: [...EXTRACTION],
  },
  'GET /subscriptions/{}': {
    operationId: 'get_subscription',
    tag: 'subscription',
    summary: 'Get subscription',
    description: 'One subscription.',
    success: [{ status: '200', description: 'Subscription', schema: SubscriptionResponse }],
    errors: [400, 404],
  },
  'GET /subscriptions/{}/status': {
    operationId: 'get_subscription_status',
    tag: 'subscription',
    summary: 'Subscription consumer status (Ratchet)',
    description:
      "Whether the subscription consumes: each runtime node's consumer (its state in the consumer group, the topic " +
      'partitions it reads with their position, lag, unfinished invocations and back-pressure), the partitions ' +
      'assigned, the total lag and the last error (an unreachable broker, a missing topic, bad credentials). Any ' +
      'node answers, from what every node reports every two seconds.',
    success: [{ status: '200', description: 'Subscription status', schema: SubscriptionStatusResponse }],
    errors: [400, 404],
  },
  'DELETE /subscriptions/{}': {
    operationId: 'delete_subscription',
    tag: 'subscription',
    summary: 'Delete subscription',
    description: 'Removes a subscription.',
    success: [{ status: '202', description: 'Deleted' }],
    errors: [400, 404],
  },
  'PATCH /invocations/{}/cancel': {
    operationId: 'cancel_invocation',
    tag: 'invocation',
    summary: 'Cancel an invocation',
    description: 'Asks a running invocation to cancel (its handlers run their compensations).',
    success: [
      { status: '200', description: 'Cancelled' },
      { status: '202', description: 'Cancellation requested' },
    ],
    errors: [400, 404, 409, 503],
  },
  'PATCH /invocations/{}/kill': {
    operationId: 'kill_invocation',
    tag: 'invocation',
    summary: 'Kill an invocation',
    description: 'Ends an invocation at once, without running compensations.',
    success: [{ status: '200', description: 'Killed' }],
    errors: [400, 404, 409, 503],
  },
  'PATCH /invocations/{}/purge': {
    operationId: 'purge_invocation',
    tag: 'invocation',
    summary: 'Purge an invocation',
    description: 'Removes a completed invocation, its result and journal.',
    success: [{ status: '200', description: 'Purged' }],
    errors: [400, 404, 409, 503],
  },
  'PATCH /invocations/{}/purge-journal': {
    operationId: 'purge_journal',
    tag: 'invocation',
    summary: 'Purge the journal of an invocation',
    description: 'Removes the journal of a completed invocation, keeping its result.',
    success: [{ status: '200', description: 'Journal purged' }],
    errors: [400, 404, 409, 503],
  },
  'PATCH /invocations/{}/restart-as-new': {
    operationId: 'restart_as_new_invocation',
    tag: 'invocation',
    summary: 'Restart an invocation as new',
    description: 'Creates a new invocation from a completed one, optionally copying a prefix of its journal.',
    query: RestartAsNewInvocationQuery,
    success: [{ status: '200', description: 'Restarted', schema: RestartAsNewInvocationResponse }],
    errors: [400, 404, 409, 410, 422, 425, 503],
  },
  'GET /invocations/{}/logs': {
    operationId: 'invocation_logs',
    tag: 'invocation',
    summary: "An invocation's log lines (Ratchet)",
    description:
      "Ratchet's own route, not restate's: the lines of the observability store that mention the invocation (its " +
      'lifecycle, retries with their errors, what its handler logged through Ratchet), oldest first, from every node. ' +
      'The same lines as `{…} |= "<id>"` on the Loki API of the observability listener. 404 when this node keeps no ' +
      'store (`RATCHET_OBSERVABILITY_STORE=off`).',
    query: InvocationActivityQuery,
    success: [{ status: '200', description: 'Its lines', schema: InvocationLogsResponse }],
    errors: [400, 404, 503],
  },
  'GET /invocations/{}/trace': {
    operationId: 'invocation_trace',
    tag: 'invocation',
    summary: "An invocation's trace (Ratchet)",
    description:
      "Ratchet's own route, not restate's: every span of the traces the invocation's spans belong to (the ingress " +
      'request, `invocation-start`, each attempt with its error, `invocation-end`), from every node. The same spans ' +
      'as the Tempo API of the observability listener. 404 when this node keeps no store.',
    query: InvocationActivityQuery,
    success: [{ status: '200', description: 'Its spans', schema: InvocationTraceResponse }],
    errors: [400, 404, 503],
  },
  'PATCH /invocations/{}/pause': {
    operationId: 'pause_invocation',
    tag: 'invocation',
    summary: 'Pause an invocation',
    description: 'Stops retrying an invocation until it is resumed.',
    success: [
      { status: '200', description: 'Already paused' },
      { status: '202', description: 'Pausing' },
    ],
    errors: [400, 404, 409, 503],
  },
  'PATCH /invocations/{}/resume': {
    operationId: 'resume_invocation',
    tag: 'invocation',
    summary: 'Resume an invocation',
    description: 'Resumes a paused invocation, optionally on another deployment.',
    query: ResumeInvocationQuery,
    success: [{ status: '200', description: 'Resumed' }],
    errors: [400, 404, 409, 425, 503],
  },
  'DELETE /invocations/{}': {
    operationId: 'delete_invocation',
    tag: 'invocation',
    summary: 'Cancel, kill or purge an invocation (deprecated)',
    description: 'Deprecated: use the PATCH operations. `mode` is `Cancel` (default), `Kill` or `Purge`.',
    query: DeleteInvocationQuery,
    success: [{ status: '202', description: 'Accepted' }],
    errors: [400, 404, 409],
  },
};
