/**
 * The 35 statements restate CLI 1.7.12 sends to `POST /query` (captured: shared/spec/cli-sql-queries.md), verbatim
 * except for the ids, which come from the lab scenario (lab.ts). `accept` is what the CLI asks for: JSON rows, or an
 * Arrow IPC stream (`*∕*`).
 */

export interface CliStatement {
  readonly name: string;
  readonly accept: 'json' | 'arrow';
  readonly sql: string;
}

export interface StatementIds {
  /** An invocation the CLI looks up by id (paused in the lab). */
  readonly paused: string;
  /** An invocation the CLI cancels / pauses (suspended in the lab). */
  readonly sleeping: string;
  /** Every invocation id of the lab, for the detail queries' `inv.id in (…)` lists. */
  readonly all: readonly string[];
  readonly deploymentId: string;
}

export function cliStatements(lab: StatementIds): CliStatement[] {
  const { paused, sleeping, deploymentId } = lab;
  const ids = lab.all.map((id) => `'${id}'`).join(',');
  return [
    {
      name: 'Q1',
      accept: 'json',
      sql: `SELECT
                target_service_name,
                target_handler_name,
                'pending' as status,
                COUNT(1) as num_invocations,
                MIN(created_at) as oldest_at,
                FIRST_VALUE(id ORDER BY created_at ASC) as oldest_invocation
             FROM sys_invocation_status
             WHERE status == 'inboxed' AND target_service_name IN ('Greeter')
             GROUP BY target_service_name, target_handler_name`,
    },
    {
      name: 'Q2',
      accept: 'json',
      sql: `            SELECT
                target_service_name,
                target_handler_name,
                status,
                COUNT(1) as num_invocations,
                MIN(created_at) as oldest_at,
                FIRST_VALUE(id ORDER BY created_at ASC) as oldest_invocation
            FROM sys_invocation
            WHERE target_service_name IN ('Greeter')
            GROUP BY target_service_name, target_handler_name, status
            ORDER BY target_handler_name`,
    },
    {
      name: 'Q3',
      accept: 'json',
      sql: `SELECT
            id
        FROM sys_invocation inv
        WHERE inv.target_service_name = 'Greeter'
        ORDER BY inv.created_at DESC, inv.id
        LIMIT 5`,
    },
    {
      name: 'Q4',
      accept: 'json',
      sql: `SELECT
            inv.id,
            inv.target,
            inv.target_service_ty,
            inv.idempotency_key,
            inv.status,
            inv.created_at,
            inv.modified_at as state_modified_at,
            inv.pinned_deployment_id,
            inv.retry_count as num_retries,
            inv.last_failure as last_failure_message,
            inv.last_failure_related_entry_index as last_failure_entry_index,
            inv.last_failure_related_entry_name as last_failure_entry_name,
            inv.last_failure_related_entry_type as last_failure_entry_ty,
            inv.last_attempt_deployment_id,
            inv.last_attempt_server,
            inv.next_retry_at,
            inv.last_start_at,
            inv.invoked_by_id,
            inv.invoked_by_target,
            inv.trace_id,
            inv.completion_result,
            inv.completion_failure,
            dp.id IS NOT NULL as pinned_deployment_exists
        FROM sys_invocation inv
        LEFT JOIN sys_deployment dp ON dp.id = inv.pinned_deployment_id
        WHERE inv.target_service_name = 'Greeter' AND inv.id in (${ids})
        ORDER BY inv.created_at DESC, inv.id`,
    },
    {
      name: 'Q5',
      accept: 'arrow',
      sql: `SELECT COUNT(1) FROM (SELECT
            *
        FROM sys_invocation inv
        LIMIT 50000
        )
        WHERE status != 'completed'`,
    },
    {
      name: 'Q6',
      accept: 'json',
      sql: `SELECT
            id
        FROM sys_invocation inv
        WHERE status != 'completed'
        ORDER BY inv.created_at DESC, inv.id
        LIMIT 100`,
    },
    {
      name: 'Q7',
      accept: 'json',
      sql: `SELECT
            inv.id,
            inv.target,
            inv.target_service_ty,
            inv.idempotency_key,
            inv.status,
            inv.created_at,
            inv.modified_at as state_modified_at,
            inv.pinned_deployment_id,
            inv.retry_count as num_retries,
            inv.last_failure as last_failure_message,
            inv.last_failure_related_entry_index as last_failure_entry_index,
            inv.last_failure_related_entry_name as last_failure_entry_name,
            inv.last_failure_related_entry_type as last_failure_entry_ty,
            inv.last_attempt_deployment_id,
            inv.last_attempt_server,
            inv.next_retry_at,
            inv.last_start_at,
            inv.invoked_by_id,
            inv.invoked_by_target,
            inv.trace_id,
            inv.completion_result,
            inv.completion_failure,
            dp.id IS NOT NULL as pinned_deployment_exists
        FROM sys_invocation inv
        LEFT JOIN sys_deployment dp ON dp.id = inv.pinned_deployment_id
        WHERE status != 'completed' AND inv.id in (${ids})
        ORDER BY inv.created_at DESC, inv.id`,
    },
    {
      name: 'Q8',
      accept: 'arrow',
      sql: `SELECT COUNT(1) FROM (SELECT
            *
        FROM sys_invocation inv
        LIMIT 50000
        )`,
    },
    {
      name: 'Q9',
      accept: 'json',
      sql: `SELECT
            id
        FROM sys_invocation inv
        
        ORDER BY inv.created_at DESC, inv.id
        LIMIT 100`,
    },
    {
      name: 'Q10',
      accept: 'json',
      sql: `SELECT
            inv.id,
            inv.target,
            inv.target_service_ty,
            inv.idempotency_key,
            inv.status,
            inv.created_at,
            inv.modified_at as state_modified_at,
            inv.pinned_deployment_id,
            inv.retry_count as num_retries,
            inv.last_failure as last_failure_message,
            inv.last_failure_related_entry_index as last_failure_entry_index,
            inv.last_failure_related_entry_name as last_failure_entry_name,
            inv.last_failure_related_entry_type as last_failure_entry_ty,
            inv.last_attempt_deployment_id,
            inv.last_attempt_server,
            inv.next_retry_at,
            inv.last_start_at,
            inv.invoked_by_id,
            inv.invoked_by_target,
            inv.trace_id,
            inv.completion_result,
            inv.completion_failure,
            dp.id IS NOT NULL as pinned_deployment_exists
        FROM sys_invocation inv
        LEFT JOIN sys_deployment dp ON dp.id = inv.pinned_deployment_id
        WHERE inv.id in (${ids})
        ORDER BY inv.created_at DESC, inv.id`,
    },
    {
      name: 'Q11',
      accept: 'json',
      sql: `SELECT
            id
        FROM sys_invocation inv
        WHERE inv.id = '${paused}'
        
        LIMIT 1`,
    },
    {
      name: 'Q12',
      accept: 'json',
      sql: `SELECT
            inv.id,
            inv.target,
            inv.target_service_ty,
            inv.idempotency_key,
            inv.status,
            inv.created_at,
            inv.modified_at as state_modified_at,
            inv.pinned_deployment_id,
            inv.retry_count as num_retries,
            inv.last_failure as last_failure_message,
            inv.last_failure_related_entry_index as last_failure_entry_index,
            inv.last_failure_related_entry_name as last_failure_entry_name,
            inv.last_failure_related_entry_type as last_failure_entry_ty,
            inv.last_attempt_deployment_id,
            inv.last_attempt_server,
            inv.next_retry_at,
            inv.last_start_at,
            inv.invoked_by_id,
            inv.invoked_by_target,
            inv.trace_id,
            inv.completion_result,
            inv.completion_failure,
            dp.id IS NOT NULL as pinned_deployment_exists
        FROM sys_invocation inv
        LEFT JOIN sys_deployment dp ON dp.id = inv.pinned_deployment_id
        WHERE inv.id = '${paused}' AND inv.id in (${ids})`,
    },
    {
      name: 'Q13',
      accept: 'arrow',
      sql: `SELECT COUNT(*) FROM information_schema.columns
            WHERE
                table_name = 'sys_journal'
                AND column_name IN ('promise_name')`,
    },
    {
      name: 'Q14',
      accept: 'arrow',
      sql: `SELECT COUNT(*) FROM information_schema.columns
            WHERE
                table_name = 'sys_journal'
                AND column_name IN ('version', 'entry_json', 'appended_at')`,
    },
    {
      name: 'Q15',
      accept: 'json',
      sql: `SELECT
            sj.index,
            sj.entry_type,
            sj.completed,
            sj.invoked_id,
            sj.invoked_target,
            sj.sleep_wakeup_at,
            sj.name,
            sj.promise_name,
            sj.version, sj.entry_json, sj.appended_at
        FROM sys_journal sj
        WHERE
            sj.id = '${paused}'
        ORDER BY index DESC
        LIMIT 100`,
    },
    { name: 'Q16', accept: 'arrow', sql: `select id, status from sys_invocation limit 3` },
    { name: 'Q17', accept: 'arrow', sql: `select id, status from sys_invocation limit 2` },
    {
      name: 'Q18',
      accept: 'json',
      sql: `select key, value from state where service_name = 'Counter' and service_key = 'k1' ;`,
    },
    {
      name: 'Q19',
      accept: 'json',
      sql: `SELECT id, is_active, queue_is_paused, service_name, scope, limit_key, lock_name, created_at, last_enqueued_at, last_start_at, last_attempt_at, last_finish_at, num_inbox, num_running, num_suspended, num_paused, num_finished FROM sys_vqueue_meta LIMIT 100`,
    },
    {
      name: 'Q20',
      accept: 'json',
      sql: `SELECT pattern, concurrency, description, disabled, version, last_modified FROM sys_rules ORDER BY pattern`,
    },
    {
      name: 'Q21',
      accept: 'json',
      sql: `SELECT id, target FROM sys_invocation_status WHERE id = '${sleeping}' AND status != 'completed' LIMIT 500`,
    },
    {
      name: 'Q22',
      accept: 'json',
      sql: `SELECT id, target FROM sys_invocation_status WHERE id = '${sleeping}' AND status = 'completed' LIMIT 500`,
    },
    {
      name: 'Q23',
      accept: 'json',
      sql: `SELECT id, target FROM sys_invocation_status WHERE id = '${sleeping}' AND status IN ('invoked', 'suspended') LIMIT 500`,
    },
    {
      name: 'Q24',
      accept: 'json',
      sql: `SELECT id, target FROM sys_invocation_status WHERE id = '${paused}' AND status IN ('paused', 'invoked', 'suspended') LIMIT 500`,
    },
    {
      name: 'Q25',
      accept: 'json',
      sql: `SELECT service_name, service_key, key, value FROM state WHERE service_name = 'Counter' AND service_key = 'k2'`,
    },
    {
      name: 'Q26',
      accept: 'json',
      sql: `SELECT pattern, concurrency, description, disabled, version, last_modified FROM sys_rules WHERE pattern = 'Counter/*'`,
    },
    {
      name: 'Q27',
      accept: 'arrow',
      sql: `SELECT COUNT(1) FROM (SELECT
            *
        FROM sys_invocation inv
        LIMIT 50000
        )
        WHERE inv.target_service_name IN ('Counter') AND status IN ('completed')`,
    },
    {
      name: 'Q28',
      accept: 'json',
      sql: `SELECT
            id
        FROM sys_invocation inv
        WHERE inv.target_service_name IN ('Counter') AND status IN ('completed')
        ORDER BY inv.created_at DESC, inv.id
        LIMIT 100`,
    },
    {
      name: 'Q29',
      accept: 'json',
      sql: `SELECT
            inv.id,
            inv.target,
            inv.target_service_ty,
            inv.idempotency_key,
            inv.status,
            inv.created_at,
            inv.modified_at as state_modified_at,
            inv.pinned_deployment_id,
            inv.retry_count as num_retries,
            inv.last_failure as last_failure_message,
            inv.last_failure_related_entry_index as last_failure_entry_index,
            inv.last_failure_related_entry_name as last_failure_entry_name,
            inv.last_failure_related_entry_type as last_failure_entry_ty,
            inv.last_attempt_deployment_id,
            inv.last_attempt_server,
            inv.next_retry_at,
            inv.last_start_at,
            inv.invoked_by_id,
            inv.invoked_by_target,
            inv.trace_id,
            inv.completion_result,
            inv.completion_failure,
            dp.id IS NOT NULL as pinned_deployment_exists
        FROM sys_invocation inv
        LEFT JOIN sys_deployment dp ON dp.id = inv.pinned_deployment_id
        WHERE inv.target_service_name IN ('Counter') AND status IN ('completed') AND inv.id in (${ids})
        ORDER BY inv.created_at DESC, inv.id`,
    },
    {
      name: 'Q30',
      accept: 'json',
      sql: `SELECT
                target_service_name,
                target_handler_name,
                'pending' as status,
                COUNT(1) as num_invocations,
                MIN(created_at) as oldest_at,
                FIRST_VALUE(id ORDER BY created_at ASC) as oldest_invocation
             FROM sys_invocation_status
             WHERE status == 'inboxed' AND target_service_name IN ('Greeter','Flaky','Counter','Signup')
             GROUP BY target_service_name, target_handler_name`,
    },
    {
      name: 'Q31',
      accept: 'json',
      sql: `            SELECT
                target_service_name,
                target_handler_name,
                status,
                COUNT(1) as num_invocations,
                MIN(created_at) as oldest_at,
                FIRST_VALUE(id ORDER BY created_at ASC) as oldest_invocation
            FROM sys_invocation
            WHERE target_service_name IN ('Greeter','Flaky','Counter','Signup')
            GROUP BY target_service_name, target_handler_name, status
            ORDER BY target_handler_name`,
    },
    {
      name: 'Q32',
      accept: 'json',
      sql: `SELECT
                service_name,
                service_key,
                COUNT(1) as num_pending
             FROM sys_inbox
             WHERE service_name IN ('Counter','Signup')
             GROUP BY service_name, service_key
             ORDER BY num_pending DESC`,
    },
    {
      name: 'Q33',
      accept: 'json',
      sql: `            SELECT
                target_service_name as service_name,
                target_service_key as service_key,
                status as invocation_status,
                first_value(id) as invocation_holding_lock,
                first_value(target_handler_name) as invocation_method_holding_lock,
                first_value(created_at) as invocation_created_at,
                first_value(modified_at) as modified_at,
                first_value(pinned_deployment_id) as pinned_deployment_id,
                first_value(last_attempt_deployment_id) as last_attempt_deployment_id,
                first_value(last_failure) as last_failure_message,
                first_value(next_retry_at) as next_retry_at,
                first_value(last_start_at) as last_start_at,
                0 as num_pending,
                sum(retry_count) as num_retries
            FROM sys_invocation
            WHERE status != 'pending' AND target_service_name IN ('Counter','Signup')
            GROUP BY target_service_name, target_service_key, status`,
    },
    {
      name: 'Q34',
      accept: 'json',
      sql: `SELECT id, target FROM sys_invocation_status WHERE ((target = 'Greeter/sleep' AND target_service_ty = 'service') OR (target LIKE 'Greeter/sleep/%' AND target_service_ty != 'service')) AND status != 'completed' LIMIT 500`,
    },
    {
      name: 'Q35',
      accept: 'json',
      sql: `SELECT
            target_service_name as service,
            target_handler_name as handler,
            COUNT(1) AS inv_count
            FROM sys_invocation_status
            WHERE pinned_deployment_id = '${deploymentId}' AND status != 'completed'
            GROUP BY pinned_deployment_id, target_service_name, target_handler_name`,
    },
  ];
}
