import type { AdminClient } from '../../admin-client/types.ts';

/*
 * How many unfinished invocations could still run on one deployment (restate-operator #172/#173/#176). Two kinds:
 *
 * - pinned: the invocation started on the deployment and must finish there (whatever its status: running,
 *   suspended, paused, backing-off);
 * - unpinned: not started yet (pending/inboxed, scheduled, ready) or between attempts without a pinned deployment.
 *   Such an invocation is pinned to the *latest* deployment of its service when its first attempt starts, so it can
 *   only reach this deployment through a service this deployment is still the latest for — the case of deleting
 *   the latest deployment, where queued, scheduled and paused invocations must not be forgotten (#176). An unpinned
 *   invocation whose last attempt went to this deployment is counted as well: its attempt may be in flight there
 *   before the pin is recorded.
 *
 * "Latest for a service" is kept apart from "has unfinished invocations": a latest deployment with nothing unfinished
 * is idle and may be removed (#172).
 */

export interface DrainQuery {
  readonly deploymentId: string;
  /** Services whose latest deployment is this one (unpinned invocations of these will run on it). */
  readonly latestForServices: readonly string[];
}

export interface DrainCounts {
  readonly pinned: number;
  readonly unpinned: number;
}

export const totalPending = (c: DrainCounts): number => c.pinned + c.unpinned;

/** Counts the unfinished invocations that could still run on one deployment. */
export type DrainProbe = (admin: AdminClient, query: DrainQuery) => Promise<DrainCounts>;

const literal = (value: string): string => `'${value.replaceAll("'", "''")}'`;

/**
 * One statement, valid in restate's DataFusion and in Ratchet's PostgreSQL views alike: `count(CASE … END)` instead
 * of `FILTER`, no `IN ()` when the list is empty, and `count` so that an empty match still yields one row of zeros.
 */
export function drainCountsSql(query: DrainQuery): string {
  const id = literal(query.deploymentId);
  const reachable = [`last_attempt_deployment_id = ${id}`];
  if (query.latestForServices.length > 0) {
    reachable.push(`target_service_name IN (${query.latestForServices.map(literal).join(', ')})`);
  }
  return [
    'SELECT',
    `  count(CASE WHEN pinned_deployment_id = ${id} THEN 1 END) AS pinned,`,
    '  count(CASE WHEN pinned_deployment_id IS NULL THEN 1 END) AS unpinned',
    'FROM sys_invocation',
    "WHERE status <> 'completed'",
    `  AND (pinned_deployment_id = ${id} OR (pinned_deployment_id IS NULL AND (${reachable.join(' OR ')})))`,
  ].join('\n');
}

function count(value: unknown): number {
  // UInt64/Int64 come as JSON numbers from restate; PostgreSQL's bigint may come as a string. A NULL is omitted.
  const n = typeof value === 'number' ? value : typeof value === 'string' ? Number(value) : 0;
  return Number.isFinite(n) && n > 0 ? Math.trunc(n) : 0;
}

export function parseDrainCounts(rows: readonly Record<string, unknown>[]): DrainCounts {
  const row = rows[0] ?? {};
  return { pinned: count(row['pinned']), unpinned: count(row['unpinned']) };
}

/** The production probe: `POST /query` on the runtime's introspection tables. */
export const sqlDrainProbe: DrainProbe = async (admin, query) =>
  parseDrainCounts(await admin.query(drainCountsSql(query)));
