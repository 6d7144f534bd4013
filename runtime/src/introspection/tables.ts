import { MessageType, isCommand, isNotification, messageTypeName } from '../protocol/message-types.ts';
import type { ColumnType } from './column-types.ts';

/**
 * The introspection tables: restate-server 1.7.12's tables (names, column order, column types as in
 * shared/spec/introspection-tables.md), each built as a view of the `ratchet` tables. This list is the one source of
 * the view definitions (views.ts) and of the column types results are rendered with (render-*.ts).
 *
 * Columns whose value Ratchet does not have (flow-control vqueues, rules, trace ids, journal events) exist with NULL
 * values or in empty views, so that every statement the restate CLI sends plans and answers the way it expects.
 */

export interface ColumnDef {
  readonly name: string;
  readonly type: ColumnType;
  /** SQL expression over the view's FROM clause; NULL when absent. Cast to the column's PostgreSQL type. */
  readonly sql?: string;
  /** PostgreSQL type of the view column when not the default for `type` (partition keys are u64 in numeric). */
  readonly pg?: string;
  /** restate declares every column nullable except `sys_invocation.status`. */
  readonly notNull?: boolean;
}

export interface TableDef {
  readonly name: string;
  readonly columns: readonly ColumnDef[];
  /** `FROM …` (with joins and WHERE); undefined = the view is always empty. */
  readonly from?: string;
}

/** Partition keys are u64, stored as i64 (two's complement): shown as the unsigned value. */
const u64 = (expr: string): string => `ratchet_sql.u64(${expr})`;
const PK: Pick<ColumnDef, 'type' | 'pg'> = { type: 'UInt64', pg: 'numeric' };
/** The `partition_key` column of a view, read from the same column of `alias`. */
const partitionKey = (alias: string): ColumnDef => ({
  name: 'partition_key',
  ...PK,
  sql: u64(`${alias}.partition_key`),
});

/** `"Command: Sleep"` etc. for a journal entry type id (the names restate-server shows). */
export function entryTypeNameSql(expr: string): string {
  const ids = Object.values(MessageType).filter((id) => isCommand(id) || isNotification(id));
  const whens = ids.map((id) => `WHEN ${id} THEN '${messageTypeName(id)}'`).join(' ');
  return `CASE ${expr} ${whens} ELSE 'Unknown(0x' || lpad(to_hex(${expr}), 4, '0') || ')' END`;
}

/** Commands whose result arrives as a notification with the completion id in field 11 (`result_completion_id`). */
const RESULT_COMPLETION_COMMANDS = [
  MessageType.GetLazyStateCommand,
  MessageType.GetLazyStateKeysCommand,
  MessageType.GetPromiseCommand,
  MessageType.PeekPromiseCommand,
  MessageType.CompletePromiseCommand,
  MessageType.SleepCommand,
  MessageType.CallCommand,
  MessageType.RunCommand,
  MessageType.AttachInvocationCommand,
  MessageType.GetInvocationOutputCommand,
];

/**
 * Whether a journal entry is completed: a command waiting for a notification is completed once the notification
 * with its completion id is in the journal (OneWayCall: its invocation-id notification, field 10); notifications are
 * completed; commands that wait for nothing have no completion state (NULL), as in restate.
 */
const journalCompleted = `CASE
  WHEN j.entry_type >= 32768 THEN true
  WHEN j.entry_type IN (${RESULT_COMPLETION_COMMANDS.join(', ')}) OR j.entry_type = ${MessageType.OneWayCallCommand} THEN
    EXISTS (SELECT 1 FROM ratchet.journal n WHERE n.invocation_id = j.invocation_id AND n.entry_type >= 32768
      AND n.completion_id = ratchet_sql.protobuf_uint(j.raw, CASE WHEN j.entry_type = ${MessageType.OneWayCallCommand} THEN 10 ELSE 11 END))
  END`;

const serviceTy = (expr: string): string =>
  `CASE ${expr} WHEN 'Service' THEN 'service' WHEN 'VirtualObject' THEN 'virtual_object' WHEN 'Workflow' THEN 'workflow' ELSE lower(${expr}) END`;

const msToInterval = (expr: string): string => `(${expr} * interval '1 millisecond')`;

/** A failure as restate shows it, `[code] message`, from the `failure_code` and `failure_message` of `alias`. */
const failureText = (alias: string): string => `'[' || ${alias}.failure_code || '] ' || ${alias}.failure_message`;

/** What a suspended invocation (`i`) waits for: the ids in one list of its `awaiting` JSON. */
const awaitedIds = (list: 'completions' | 'signals'): string =>
  `CASE WHEN i.status = 'suspended' AND jsonb_typeof(i.awaiting -> '${list}') = 'array'
    THEN ARRAY(SELECT e::bigint FROM jsonb_array_elements_text(i.awaiting -> '${list}') AS e) END`;

/** Columns of an always-empty table, written `name:Type`. */
function empty(spec: string): ColumnDef[] {
  return spec
    .trim()
    .split(/\s+/)
    .map((item) => {
      const [name, type] = item.split(':') as [string, ColumnType];
      return name === 'partition_key' ? { name, ...PK } : { name, type };
    });
}

/** An invocation held back by flow control: runnable, queued, and not started since it became runnable. */
const FLOW_WAITING = (a: string): string =>
  `(${a}.status = 'invoked' AND ${a}.vqueue_id IS NOT NULL AND ${a}.last_start_at IS NULL AND ${a}.next_retry_at IS NULL)`;

const sysInvocationStatus: TableDef = {
  name: 'sys_invocation_status',
  columns: [
    partitionKey('i'),
    { name: 'id', type: 'LargeUtf8', sql: 'i.id' },
    { name: 'vqueue_id', type: 'LargeUtf8', sql: 'i.vqueue_id' },
    // Flow control: one that waits for its queue or a concurrency permit has not started since it became runnable
    // (restate shows it inboxed, i.e. pending).
    { name: 'status', type: 'LargeUtf8', sql: `CASE WHEN ${FLOW_WAITING('i')} THEN 'inboxed' ELSE i.status END` },
    { name: 'completion_result', type: 'LargeUtf8', sql: `CASE WHEN i.status = 'completed' THEN i.result_kind END` },
    {
      name: 'completion_failure',
      type: 'LargeUtf8',
      sql: `CASE WHEN i.status = 'completed' AND i.result_kind = 'failure' THEN ${failureText('i')} END`,
    },
    {
      name: 'target',
      type: 'LargeUtf8',
      sql: `i.service_name || '/' || CASE WHEN i.service_key IS NULL THEN '' ELSE i.service_key || '/' END || i.handler_name`,
    },
    { name: 'target_service_name', type: 'LargeUtf8', sql: 'i.service_name' },
    { name: 'target_service_key', type: 'LargeUtf8', sql: 'i.service_key' },
    { name: 'target_handler_name', type: 'LargeUtf8', sql: 'i.handler_name' },
    { name: 'target_service_ty', type: 'LargeUtf8', sql: serviceTy('i.service_ty') },
    { name: 'scope', type: 'LargeUtf8', sql: 'i.scope' },
    { name: 'limit_key', type: 'LargeUtf8', sql: 'i.limit_key' },
    { name: 'idempotency_key', type: 'LargeUtf8', sql: 'i.idempotency_key' },
    { name: 'invoked_by', type: 'LargeUtf8', sql: 'i.invoked_by' },
    {
      name: 'invoked_by_id',
      type: 'LargeUtf8',
      sql: `CASE WHEN i.invoked_by <> 'subscription' THEN i.invoked_by_id END`,
    },
    {
      name: 'invoked_by_subscription_id',
      type: 'LargeUtf8',
      sql: `CASE WHEN i.invoked_by = 'subscription' THEN i.invoked_by_id END`,
    },
    {
      name: 'invoked_by_service_name',
      type: 'LargeUtf8',
      sql: `CASE WHEN i.invoked_by = 'service' THEN split_part(i.invoked_by_target, '/', 1) END`,
    },
    { name: 'invoked_by_target', type: 'LargeUtf8', sql: 'i.invoked_by_target' },
    { name: 'restarted_from', type: 'LargeUtf8', sql: 'i.restarted_from' },
    { name: 'pinned_deployment_id', type: 'LargeUtf8', sql: 'i.deployment_id' },
    { name: 'pinned_service_protocol_version', type: 'UInt32', sql: 'i.protocol_version' },
    // The trace id of the invocation's spans (traceparent: "00-" trace id "-" …), as on 3100.
    { name: 'trace_id', type: 'LargeUtf8', sql: 'substr(i.trace_context, 4, 32)' },
    // Scalar subqueries: computed only when a statement asks for the column.
    {
      name: 'journal_size',
      type: 'UInt32',
      sql: '(SELECT count(*) FROM ratchet.journal e WHERE e.invocation_id = i.id)',
    },
    {
      name: 'journal_commands_size',
      type: 'UInt32',
      sql: '(SELECT count(*) FROM ratchet.journal e WHERE e.invocation_id = i.id AND e.entry_type BETWEEN 1024 AND 32767)',
    },
    { name: 'created_at', type: 'TimestampMs', sql: 'i.created_at' },
    { name: 'created_using_restate_version', type: 'LargeUtf8' },
    { name: 'modified_at', type: 'TimestampMs', sql: 'i.modified_at' },
    { name: 'inboxed_at', type: 'TimestampMs', sql: `CASE WHEN i.status = 'inboxed' THEN i.modified_at END` },
    {
      name: 'scheduled_at',
      type: 'TimestampMs',
      sql: `CASE WHEN i.scheduled_start_at IS NOT NULL THEN i.created_at END`,
    },
    { name: 'scheduled_start_at', type: 'TimestampMs', sql: 'i.scheduled_start_at' },
    { name: 'running_at', type: 'TimestampMs', sql: 'i.running_at' },
    { name: 'completed_at', type: 'TimestampMs', sql: 'i.completed_at' },
    { name: 'completion_retention', type: 'DurationMs', sql: msToInterval('i.completion_retention_ms') },
    { name: 'journal_retention', type: 'DurationMs', sql: msToInterval('i.journal_retention_ms') },
    { name: 'suspended_waiting_for_completions', type: 'List<UInt32>', sql: awaitedIds('completions') },
    { name: 'suspended_waiting_for_signals', type: 'List<UInt32>', sql: awaitedIds('signals') },
    {
      name: 'suspended_waiting_future_json',
      type: 'LargeUtf8',
      sql: `CASE WHEN i.status = 'suspended' THEN i.awaiting::text END`,
    },
  ],
  from: 'FROM ratchet.invocation i',
};

/**
 * The invoker's view of invocations that are running or waiting for a retry (restate: in-flight ones). Paused
 * invocations are listed too, so that the failure that paused them stays visible.
 */
const sysInvocationState: TableDef = {
  name: 'sys_invocation_state',
  columns: [
    partitionKey('i'),
    { name: 'id', type: 'LargeUtf8', sql: 'i.id' },
    {
      name: 'in_flight',
      type: 'Boolean',
      sql: `i.status = 'invoked' AND i.next_retry_at IS NULL AND i.last_start_at IS NOT NULL`,
    },
    { name: 'retry_count', type: 'UInt64', sql: 'i.retry_count' },
    { name: 'last_start_at', type: 'TimestampMs', sql: 'i.last_start_at' },
    { name: 'last_attempt_deployment_id', type: 'LargeUtf8', sql: 'i.last_attempt_deployment_id' },
    { name: 'last_attempt_server', type: 'LargeUtf8', sql: 'd.sdk_version' },
    { name: 'next_retry_at', type: 'TimestampMs', sql: 'i.next_retry_at' },
    { name: 'last_failure', type: 'LargeUtf8', sql: 'i.last_failure' },
    { name: 'last_failure_error_code', type: 'LargeUtf8', sql: 'i.last_failure_code' },
    { name: 'last_failure_related_command_index', type: 'UInt64', sql: 'i.last_failure_related_command_index' },
    { name: 'last_failure_related_command_name', type: 'LargeUtf8', sql: 'i.last_failure_related_command_name' },
    {
      name: 'last_failure_related_command_type',
      type: 'LargeUtf8',
      sql: `CASE WHEN i.last_failure_related_command_type ~ '^[0-9]+$'
        THEN ${entryTypeNameSql('i.last_failure_related_command_type::integer')}
        ELSE i.last_failure_related_command_type END`,
    },
    { name: 'last_failure_related_entry_index', type: 'UInt64' },
    { name: 'last_failure_related_entry_name', type: 'LargeUtf8' },
    { name: 'last_failure_related_entry_type', type: 'LargeUtf8' },
    { name: 'last_awaiting_on_future_json', type: 'LargeUtf8' },
  ],
  from: `FROM ratchet.invocation i LEFT JOIN ratchet.deployment d ON d.id = i.last_attempt_deployment_id
    WHERE i.status IN ('invoked', 'paused')`,
};

const STATE_COLUMNS = new Set(sysInvocationState.columns.map((c) => c.name));
const STATUS_COLUMNS = new Set(sysInvocationStatus.columns.map((c) => c.name));

/** sys_invocation = sys_invocation_status ⟕ sys_invocation_state, with the derived status. */
const SYS_INVOCATION_ORDER = `id vqueue_id target target_service_name target_service_key target_handler_name
  target_service_ty scope limit_key idempotency_key invoked_by invoked_by_service_name invoked_by_id
  invoked_by_subscription_id invoked_by_target restarted_from pinned_deployment_id pinned_service_protocol_version
  trace_id journal_size journal_commands_size created_at created_using_restate_version modified_at inboxed_at
  scheduled_at scheduled_start_at running_at completed_at completion_retention journal_retention
  suspended_waiting_for_completions suspended_waiting_for_signals suspended_waiting_future_json retry_count
  last_start_at next_retry_at last_attempt_deployment_id last_attempt_server last_failure last_failure_error_code
  last_failure_related_entry_index last_failure_related_entry_name last_failure_related_entry_type
  last_failure_related_command_index last_failure_related_command_name last_failure_related_command_type
  last_awaiting_on_future_json status completion_result completion_failure`;

const sysInvocation: TableDef = {
  name: 'sys_invocation',
  columns: SYS_INVOCATION_ORDER.trim()
    .split(/\s+/)
    .map((name): ColumnDef => {
      if (name === 'status') {
        return {
          name,
          type: 'LargeUtf8',
          notNull: true,
          sql: `CASE s.status
            WHEN 'inboxed' THEN 'pending'
            WHEN 'invoked' THEN CASE WHEN st.in_flight THEN 'running' WHEN st.next_retry_at IS NOT NULL THEN 'backing-off' ELSE 'ready' END
            ELSE s.status END`,
        };
      }
      const fromStatus = STATUS_COLUMNS.has(name);
      const def = (fromStatus ? sysInvocationStatus : sysInvocationState).columns.find((c) => c.name === name);
      if (def === undefined || (!fromStatus && !STATE_COLUMNS.has(name)))
        throw new Error(`sys_invocation column ${name} is in neither source`);
      return { name, type: def.type, sql: `${fromStatus ? 's' : 'st'}.${name}` };
    }),
  from: `FROM ratchet_sql.sys_invocation_status s LEFT JOIN ratchet_sql.sys_invocation_state st ON st.id = s.id`,
};

const sysJournal: TableDef = {
  name: 'sys_journal',
  columns: [
    partitionKey('i'),
    { name: 'id', type: 'LargeUtf8', sql: 'j.invocation_id' },
    { name: 'index', type: 'UInt32', sql: 'j.index' },
    { name: 'entry_type', type: 'LargeUtf8', sql: entryTypeNameSql('j.entry_type') },
    {
      name: 'name',
      type: 'LargeUtf8',
      // Input carries no name and may be large: not scanned.
      sql: `CASE WHEN j.entry_type = ${MessageType.InputCommand} THEN ''
        WHEN j.entry_type BETWEEN 1024 AND 32767 THEN coalesce(j.name, ratchet_sql.protobuf_string(j.raw, 12), '') END`,
    },
    { name: 'completed', type: 'Boolean', sql: journalCompleted },
    { name: 'invoked_id', type: 'LargeUtf8', sql: 'j.invoked_id' },
    { name: 'invoked_target', type: 'LargeUtf8', sql: 'j.invoked_target' },
    { name: 'sleep_wakeup_at', type: 'TimestampMs', sql: 'j.sleep_wakeup_at' },
    { name: 'promise_name', type: 'LargeUtf8', sql: 'j.promise_name' },
    { name: 'raw', type: 'LargeBinary', sql: 'j.raw' },
    { name: 'raw_length', type: 'UInt64', sql: 'octet_length(j.raw)' },
    // Journal format 2 (protocol V5+), the only one Ratchet stores.
    { name: 'version', type: 'UInt32', sql: '2' },
    { name: 'entry_json', type: 'LargeUtf8' },
    { name: 'entry_lite_json', type: 'LargeUtf8' },
    { name: 'appended_at', type: 'TimestampMs', sql: 'j.appended_at' },
  ],
  from: `FROM ratchet.journal j JOIN ratchet.invocation i ON i.id = j.invocation_id`,
};

const state: TableDef = {
  name: 'state',
  columns: [
    partitionKey('s'),
    { name: 'scope', type: 'LargeUtf8' },
    { name: 'service_name', type: 'LargeUtf8', sql: 's.service_name' },
    { name: 'service_key', type: 'LargeUtf8', sql: 's.service_key' },
    { name: 'key', type: 'LargeUtf8', sql: 'ratchet_sql.utf8_or_null(s.key)' },
    { name: 'key_length', type: 'UInt64', sql: 'octet_length(s.key)' },
    { name: 'value_utf8', type: 'LargeUtf8', sql: 'ratchet_sql.utf8_or_null(s.value)' },
    { name: 'value', type: 'LargeBinary', sql: 's.value' },
    { name: 'value_length', type: 'UInt64', sql: 'octet_length(s.value)' },
  ],
  from: 'FROM ratchet.state s',
};

const sysPromise: TableDef = {
  name: 'sys_promise',
  columns: [
    partitionKey('p'),
    { name: 'scope', type: 'LargeUtf8' },
    { name: 'service_name', type: 'LargeUtf8', sql: 'p.service_name' },
    { name: 'service_key', type: 'LargeUtf8', sql: 'p.service_key' },
    { name: 'key', type: 'LargeUtf8', sql: 'p.key' },
    { name: 'completed', type: 'Boolean', sql: 'p.completed' },
    {
      name: 'completion_success_value',
      type: 'LargeBinary',
      sql: `CASE WHEN p.result_kind = 'success' THEN p.value END`,
    },
    {
      name: 'completion_success_value_utf8',
      type: 'LargeUtf8',
      sql: `CASE WHEN p.result_kind = 'success' THEN ratchet_sql.utf8_or_null(p.value) END`,
    },
    {
      name: 'completion_failure',
      type: 'LargeUtf8',
      sql: `CASE WHEN p.result_kind = 'failure' THEN ${failureText('p')} END`,
    },
  ],
  // Completed promises, and those someone waits for but nobody completed yet.
  from: `FROM (
      SELECT partition_key, service_name, service_key, key, true AS completed, result_kind, value, failure_code,
        failure_message
      FROM ratchet.promise
      UNION ALL
      SELECT DISTINCT ON (w.service_name, w.service_key, w.key) i.partition_key, w.service_name, w.service_key, w.key,
        false, NULL, NULL, NULL, NULL
      FROM ratchet.promise_waiter w JOIN ratchet.invocation i ON i.id = w.invocation_id
      WHERE NOT EXISTS (SELECT 1 FROM ratchet.promise c
        WHERE c.service_name = w.service_name AND c.service_key = w.service_key AND c.key = w.key)
    ) p`,
};

const sysInbox: TableDef = {
  name: 'sys_inbox',
  columns: [
    partitionKey('i'),
    { name: 'service_name', type: 'LargeUtf8', sql: 'i.service_name' },
    { name: 'service_key', type: 'LargeUtf8', sql: 'i.service_key' },
    { name: 'id', type: 'LargeUtf8', sql: 'i.id' },
    { name: 'sequence_number', type: 'UInt64', sql: 'i.inbox_seq' },
    { name: 'created_at', type: 'TimestampMs', sql: 'i.created_at' },
  ],
  from: `FROM ratchet.invocation i WHERE i.status = 'inboxed'`,
};

const sysKeyedServiceStatus: TableDef = {
  name: 'sys_keyed_service_status',
  columns: [
    partitionKey('i'),
    { name: 'service_name', type: 'LargeUtf8', sql: 'l.service_name' },
    { name: 'service_key', type: 'LargeUtf8', sql: 'l.service_key' },
    { name: 'invocation_id', type: 'LargeUtf8', sql: 'l.invocation_id' },
  ],
  from: 'FROM ratchet.keyed_lock l LEFT JOIN ratchet.invocation i ON i.id = l.invocation_id',
};

const sysService: TableDef = {
  name: 'sys_service',
  columns: [
    { name: 'name', type: 'LargeUtf8', sql: 's.name' },
    { name: 'revision', type: 'UInt64', sql: 's.revision' },
    {
      name: 'public',
      type: 'Boolean',
      sql: `coalesce((s.overrides ->> 'public')::boolean, NOT coalesce((r.metadata ->> 'ingressPrivate')::boolean, false))`,
    },
    { name: 'ty', type: 'LargeUtf8', sql: serviceTy('s.ty') },
    { name: 'deployment_id', type: 'LargeUtf8', sql: 's.deployment_id' },
  ],
  from: 'FROM ratchet.service s LEFT JOIN ratchet.service_revision r ON r.name = s.name AND r.revision = s.revision',
};

const sysDeployment: TableDef = {
  name: 'sys_deployment',
  columns: [
    { name: 'id', type: 'LargeUtf8', sql: 'd.id' },
    { name: 'ty', type: 'LargeUtf8', sql: `CASE WHEN d.arn IS NOT NULL THEN 'lambda' ELSE 'http' END` },
    { name: 'endpoint', type: 'LargeUtf8', sql: 'coalesce(d.uri, d.arn)' },
    { name: 'created_at', type: 'TimestampMs', sql: 'd.created_at' },
    { name: 'min_service_protocol_version', type: 'UInt32', sql: 'd.min_protocol_version' },
    { name: 'max_service_protocol_version', type: 'UInt32', sql: 'd.max_protocol_version' },
    {
      name: 'services',
      type: 'List<LargeUtf8>',
      sql: `ARRAY(SELECT e ->> 'name' FROM jsonb_array_elements(d.services) AS e)`,
    },
  ],
  from: 'FROM ratchet.deployment d',
};

/** Ratchet extras (not in restate 1.7.12): subscriptions and Kafka clusters, as the admin API lists them. */
const sysSubscription: TableDef = {
  name: 'sys_subscription',
  columns: [
    { name: 'id', type: 'LargeUtf8', sql: 's.id' },
    { name: 'source', type: 'LargeUtf8', sql: 's.source' },
    { name: 'sink', type: 'LargeUtf8', sql: 's.sink' },
    { name: 'kafka_cluster', type: 'LargeUtf8', sql: 's.cluster' },
    { name: 'topic', type: 'LargeUtf8', sql: 's.topic' },
    { name: 'service_name', type: 'LargeUtf8', sql: 's.service_name' },
    { name: 'handler_name', type: 'LargeUtf8', sql: 's.handler_name' },
    { name: 'options_json', type: 'LargeUtf8', sql: 's.options::text' },
    { name: 'created_at', type: 'TimestampMs', sql: 's.created_at' },
  ],
  from: 'FROM ratchet.subscription s',
};

const sysKafkaCluster: TableDef = {
  name: 'sys_kafka_cluster',
  columns: [
    { name: 'name', type: 'LargeUtf8', sql: 'k.name' },
    { name: 'properties_json', type: 'LargeUtf8', sql: 'k.properties::text' },
    { name: 'created_at', type: 'TimestampMs', sql: 'k.created_at' },
  ],
  from: 'FROM ratchet.kafka_cluster k',
};

/** The limiter's rule book (flow control). */
const sysRules: TableDef = {
  name: 'sys_rules',
  columns: [
    { name: 'pattern', type: 'LargeUtf8', sql: 'r.pattern' },
    { name: 'concurrency', type: 'UInt32', sql: 'r.concurrency' },
    { name: 'description', type: 'LargeUtf8', sql: 'r.description' },
    { name: 'disabled', type: 'Boolean', sql: 'r.disabled' },
    { name: 'version', type: 'UInt32', sql: 'r.version' },
    { name: 'last_modified', type: 'TimestampMs', sql: 'r.last_modified' },
  ],
  from: 'FROM ratchet.limit_rule r',
};

/**
 * Virtual queues (flow control), from the invocations that belong to them while their rows are kept: counts by what
 * each one does now, the times of the newest enqueue, start and finish, and averages over the finished ones. A paused
 * queue with no invocation kept is not listed.
 */
const WAITING_OR_INBOXED = `(i.status = 'inboxed' OR ${FLOW_WAITING('i')})`;
const sysVQueueMeta: TableDef = {
  name: 'sys_vqueue_meta',
  columns: [
    { name: 'partition_key', ...PK, sql: u64('min(i.partition_key)') },
    { name: 'id', type: 'LargeUtf8', sql: 'i.vqueue_id' },
    { name: 'is_active', type: 'Boolean', sql: `bool_or(i.status <> 'completed')` },
    {
      name: 'queue_is_paused',
      type: 'Boolean',
      sql: 'EXISTS (SELECT 1 FROM ratchet.vqueue_pause vp WHERE vp.vqueue_id = i.vqueue_id)',
    },
    { name: 'service_name', type: 'LargeUtf8', sql: 'min(i.service_name)' },
    { name: 'scope', type: 'LargeUtf8', sql: 'min(i.scope)' },
    { name: 'limit_key', type: 'LargeUtf8', sql: 'min(i.limit_key)' },
    {
      name: 'lock_name',
      type: 'LargeUtf8',
      sql: `min(CASE WHEN i.service_ty = 'virtual_object' AND i.service_key IS NOT NULL AND coalesce(i.handler_ty, 'Exclusive') = 'Exclusive'
        THEN i.service_name || '/' || i.service_key END)`,
    },
    { name: 'created_at', type: 'TimestampMs', sql: 'min(i.created_at)' },
    { name: 'last_enqueued_at', type: 'TimestampMs', sql: 'max(i.created_at)' },
    { name: 'last_start_at', type: 'TimestampMs', sql: 'max(i.running_at)' },
    { name: 'last_attempt_at', type: 'TimestampMs', sql: 'max(i.last_start_at)' },
    { name: 'last_finish_at', type: 'TimestampMs', sql: 'max(i.completed_at)' },
    { name: 'avg_queue_duration', type: 'DurationMs', sql: 'avg(i.running_at - i.created_at)' },
    { name: 'avg_inbox_duration', type: 'DurationMs', sql: 'avg(i.running_at - i.created_at)' },
    { name: 'avg_run_duration', type: 'DurationMs', sql: 'avg(i.completed_at - i.running_at)' },
    { name: 'avg_suspension_duration', type: 'DurationMs' },
    { name: 'avg_end_to_end_duration', type: 'DurationMs', sql: 'avg(i.completed_at - i.created_at)' },
    { name: 'avg_blocked_on_concurrency_rules', type: 'DurationMs' },
    { name: 'avg_blocked_on_invoker_concurrency', type: 'DurationMs' },
    { name: 'avg_blocked_on_invoker_throttling', type: 'DurationMs' },
    { name: 'avg_blocked_on_lock', type: 'DurationMs' },
    { name: 'num_inbox', type: 'UInt64', sql: `count(*) FILTER (WHERE ${WAITING_OR_INBOXED})` },
    {
      name: 'num_running',
      type: 'UInt64',
      sql: `count(*) FILTER (WHERE i.status = 'invoked' AND NOT ${FLOW_WAITING('i')})`,
    },
    { name: 'num_suspended', type: 'UInt64', sql: `count(*) FILTER (WHERE i.status = 'suspended')` },
    { name: 'num_paused', type: 'UInt64', sql: `count(*) FILTER (WHERE i.status = 'paused')` },
    { name: 'num_finished', type: 'UInt64', sql: `count(*) FILTER (WHERE i.status = 'completed')` },
  ],
  from: 'FROM ratchet.invocation i WHERE i.vqueue_id IS NOT NULL GROUP BY i.vqueue_id',
};

/**
 * The limiter's counters (flow control), from the rows: per scope, and per first and second limit-key level, the
 * invocations running (holding a permit: started since they became runnable and not suspended, paused or done) and
 * waiting. Limits and rules are those of the rule book that apply (the most specific enabled rule of each level).
 */
const sysUserLimits: TableDef = {
  name: 'sys_user_limits',
  columns: [
    { name: 'partition_key', ...PK, sql: u64('min(c.partition_key)') },
    { name: 'scope', type: 'LargeUtf8', sql: 'c.scope' },
    { name: 'l1', type: 'LargeUtf8', sql: 'c.l1' },
    { name: 'l2', type: 'LargeUtf8', sql: 'c.l2' },
    { name: 'level', type: 'LargeUtf8', sql: 'c.level' },
    { name: 'usage', type: 'UInt32', sql: 'count(*) FILTER (WHERE c.running)' },
    { name: 'concurrency_limit', type: 'UInt32', sql: 'ratchet_sql.rule_limit(c.scope, c.l1, c.l2)' },
    { name: 'rule_pattern', type: 'LargeUtf8', sql: 'ratchet_sql.rule_pattern(c.scope, c.l1, c.l2)' },
    {
      name: 'available',
      type: 'UInt32',
      sql: 'greatest(0, ratchet_sql.rule_limit(c.scope, c.l1, c.l2) - count(*) FILTER (WHERE c.running))',
    },
    { name: 'num_waiters', type: 'UInt64', sql: 'count(*) FILTER (WHERE c.waiting)' },
  ],
  from: `FROM (
      SELECT i.partition_key, i.scope, lv.l1, lv.l2, lv.level,
        i.status = 'invoked' AND i.last_start_at IS NOT NULL AS running, ${FLOW_WAITING('i')} AS waiting
      FROM ratchet.invocation i
      CROSS JOIN LATERAL (VALUES
        ('Scope', NULL, NULL),
        ('Level1', split_part(i.limit_key, '/', 1), NULL),
        ('Level2', split_part(i.limit_key, '/', 1), nullif(split_part(i.limit_key, '/', 2), ''))
      ) AS lv(level, l1, l2)
      WHERE i.scope IS NOT NULL AND i.status = 'invoked'
        AND (lv.level = 'Scope' OR (lv.level = 'Level1' AND i.limit_key IS NOT NULL)
             OR (lv.level = 'Level2' AND strpos(i.limit_key, '/') > 0))
    ) c
    GROUP BY c.scope, c.l1, c.l2, c.level`,
};

/** Where an invocation of a virtual queue is: restate's stages and statuses, from its row. */
const ENTRY_STAGE = `CASE WHEN ${FLOW_WAITING('i')} OR i.status IN ('inboxed', 'scheduled') THEN 'inbox'
  WHEN i.status = 'invoked' THEN 'running' WHEN i.status = 'suspended' THEN 'suspended'
  WHEN i.status = 'paused' THEN 'paused' ELSE 'finished' END`;
const ENTRY_STATUS = `CASE WHEN i.status = 'completed' THEN CASE WHEN i.result_kind = 'failure' THEN 'failed' ELSE 'succeeded' END
  WHEN ${FLOW_WAITING('i')} OR i.status IN ('inboxed', 'scheduled') THEN CASE WHEN i.last_start_at IS NULL AND i.running_at IS NULL THEN 'new' ELSE 'ready' END
  WHEN i.status = 'invoked' THEN CASE WHEN i.next_retry_at IS NOT NULL THEN 'backing_off' ELSE 'started' END
  ELSE i.status END`;
/** The entries of virtual queues (sys_vqueues, sys_vqueue_entry_status): one per invocation with a queue. */
const entryColumns = (queueColumn: string, atColumn: string, extended: boolean): ColumnDef[] => [
  partitionKey('i'),
  ...(queueColumn === 'id'
    ? [{ name: 'id', type: 'LargeUtf8', sql: 'i.vqueue_id' } as ColumnDef]
    : [
        { name: 'entry_id', type: 'LargeUtf8', sql: 'i.id' } as ColumnDef,
        { name: 'vqueue_id', type: 'LargeUtf8', sql: 'i.vqueue_id' } as ColumnDef,
      ]),
  { name: 'stage', type: 'LargeUtf8', sql: ENTRY_STAGE },
  { name: 'status', type: 'LargeUtf8', sql: ENTRY_STATUS },
  {
    name: 'has_lock',
    type: 'Boolean',
    sql: `EXISTS (SELECT 1 FROM ratchet.keyed_lock l WHERE l.invocation_id = i.id)`,
  },
  {
    name: atColumn,
    type: 'TimestampMs',
    sql: `CASE WHEN i.status = 'completed' THEN i.expires_at ELSE coalesce(i.next_retry_at, i.scheduled_start_at) END`,
  },
  { name: 'sequence_number', type: 'UInt64' },
  ...(queueColumn === 'id' ? [{ name: 'entry_id', type: 'LargeUtf8', sql: 'i.id' } as ColumnDef] : []),
  { name: 'entry_kind', type: 'LargeUtf8', sql: `'invocation'` },
  { name: 'created_at', type: 'TimestampMs', sql: 'i.created_at' },
  { name: 'transitioned_at', type: 'TimestampMs', sql: 'i.modified_at' },
  {
    name: 'num_attempts',
    type: 'UInt32',
    sql: 'CASE WHEN i.running_at IS NULL THEN 0 ELSE i.retry_count + 1 END',
  },
  { name: 'num_errors', type: 'UInt32', sql: 'i.retry_count' },
  { name: 'num_pauses', type: 'UInt32' },
  { name: 'num_suspensions', type: 'UInt32' },
  { name: 'num_yields', type: 'UInt32' },
  { name: 'first_attempt_at', type: 'TimestampMs', sql: 'i.running_at' },
  { name: 'latest_attempt_at', type: 'TimestampMs', sql: 'i.last_start_at' },
  { name: 'first_runnable_at', type: 'TimestampMs', sql: 'coalesce(i.scheduled_start_at, i.created_at)' },
  { name: 'deployment', type: 'LargeUtf8', sql: 'i.deployment_id' },
  ...(extended
    ? empty(`needed_memory:UInt64`).concat(
        [
          { name: 'retry_attempts', type: 'UInt32', sql: 'i.retry_count' },
          {
            name: 'retry_count_since_last_stored_command',
            type: 'UInt32',
            sql: 'i.retry_count_since_append',
          },
        ],
        empty(`latest_attempt_blocked_on_invoker_concurrency:DurationMs latest_attempt_blocked_on_throttling_rules:DurationMs
          latest_attempt_blocked_on_invoker_throttling:DurationMs latest_attempt_blocked_on_invoker_memory:DurationMs
          latest_attempt_blocked_on_concurrency_rules:DurationMs latest_attempt_blocked_on_lock:DurationMs
          latest_attempt_blocked_on_deployment_concurrency:DurationMs total_blocked_on_invoker_concurrency:DurationMs
          total_blocked_on_throttling_rules:DurationMs total_blocked_on_invoker_throttling:DurationMs
          total_blocked_on_invoker_memory:DurationMs total_blocked_on_concurrency_rules:DurationMs
          total_blocked_on_lock:DurationMs total_blocked_on_deployment_concurrency:DurationMs`),
      )
    : []),
];
const sysVQueues: TableDef = {
  name: 'sys_vqueues',
  columns: entryColumns('id', 'run_at', false),
  from: 'FROM ratchet.invocation i WHERE i.vqueue_id IS NOT NULL',
};
const sysVQueueEntryStatus: TableDef = {
  name: 'sys_vqueue_entry_status',
  columns: entryColumns('entry', 'next_at', true),
  from: 'FROM ratchet.invocation i WHERE i.vqueue_id IS NOT NULL',
};

// Tables of restate features Ratchet does not have (journal events, flow control): present, always empty.
const EMPTY_TABLES: TableDef[] = [
  {
    name: 'sys_journal_events',
    columns: empty(`partition_key id:LargeUtf8 after_journal_entry_index:UInt32 appended_at:TimestampMs
      event_type:LargeUtf8 event_json:LargeUtf8`),
  },
  {
    name: 'sys_locks',
    columns: empty(`partition_key scope:LargeUtf8 lock_name:LargeUtf8 acquired_at:TimestampMs acquired_by:LargeUtf8`),
  },
  {
    name: 'sys_scheduler',
    columns: empty(`partition_key id:LargeUtf8 num_inbox:UInt64 status:LargeUtf8 head_entry_id:LargeUtf8
      scheduled_at:TimestampMs blocked_on:LargeUtf8 blocked_on_json:LargeUtf8 invoker_concurrency_block_duration:DurationMs
      throttling_rules_block_duration:DurationMs invoker_throttling_block_duration:DurationMs
      invoker_memory_block_duration:DurationMs concurrency_rules_block_duration:DurationMs lock_block_duration:DurationMs
      deployment_concurrency_block_duration:DurationMs`),
  },
];

/**
 * Ratchet extras: the runtime nodes sharing the database (membership) and the owner of each partition, as
 * `GET /cluster-health` shows them. A node is alive while its heartbeat is younger than its lease timeout; a partition's
 * leader is the node whose lease of it has not run out.
 */
const sysNode: TableDef = {
  name: 'sys_node',
  columns: [
    { name: 'name', type: 'LargeUtf8', sql: 'n.name' },
    { name: 'id', type: 'UInt32', sql: 'n.id' },
    { name: 'admin_address', type: 'LargeUtf8', sql: 'n.admin_address' },
    { name: 'ingress_address', type: 'LargeUtf8', sql: 'n.ingress_address' },
    {
      name: 'alive',
      type: 'Boolean',
      sql: `n.heartbeat_at >= now() - ${msToInterval('n.lease_timeout_ms')}`,
    },
    { name: 'leaving', type: 'Boolean', sql: 'n.leaving' },
    { name: 'started_at', type: 'TimestampMs', sql: 'n.started_at' },
    { name: 'last_heartbeat', type: 'TimestampMs', sql: 'n.heartbeat_at' },
    {
      name: 'partitions',
      type: 'UInt32',
      sql: `(SELECT count(*) FROM ratchet.partition_lease l WHERE l.owner = n.name AND l.expires_at >= now())`,
    },
  ],
  from: 'FROM ratchet.node n',
};

const sysPartition: TableDef = {
  name: 'sys_partition',
  columns: [
    { name: 'partition_id', type: 'UInt32', sql: 'l.partition_id' },
    { name: 'leader', type: 'LargeUtf8', sql: `CASE WHEN l.expires_at >= now() THEN l.owner END` },
    { name: 'epoch', type: 'UInt64', sql: 'l.epoch' },
    { name: 'lease_expires_at', type: 'TimestampMs', sql: 'l.expires_at' },
    {
      name: 'start_partition_key',
      ...PK,
      sql: `floor(l.partition_id::numeric * 18446744073709551616 / (SELECT count(*) FROM ratchet.partition_lease))`,
    },
  ],
  from: 'FROM ratchet.partition_lease l',
};

/** In creation order: a view comes after the views it reads. */
export const INTROSPECTION_TABLES: readonly TableDef[] = [
  sysInvocationStatus,
  sysInvocationState,
  sysInvocation,
  sysJournal,
  state,
  sysPromise,
  sysInbox,
  sysKeyedServiceStatus,
  sysService,
  sysDeployment,
  sysSubscription,
  sysKafkaCluster,
  sysRules,
  sysVQueueMeta,
  sysUserLimits,
  sysVQueues,
  sysVQueueEntryStatus,
  sysNode,
  sysPartition,
  ...EMPTY_TABLES,
];

const BY_NAME = new Map(INTROSPECTION_TABLES.map((t) => [t.name, t]));

export function introspectionTable(name: string): TableDef | undefined {
  return BY_NAME.get(name);
}
