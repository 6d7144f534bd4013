import { formatDuration } from '../config/units.ts';
import { LOG_FIELDS } from '../telemetry/logger.ts';
import { RetentionNotModifiableError, SchemaNotFoundError } from './errors.ts';
import type { SchemaOperationDeps } from './operation-deps.ts';
import type { ActiveService, ServiceOverrides } from './types.ts';

/**
 * `PATCH /services/{name}`: settings of the latest revision of a service that win over its manifest (public,
 * retentions, timeouts). They are stored with the service (`ratchet.service.overrides`) and reach every runtime
 * process through the schema NOTIFY. A new revision of the service starts from its manifest again (restate resets
 * them as well).
 *
 * - `journal_retention` above the server maximum (`RATCHET_MAX_JOURNAL_RETENTION`) is clamped to it (RT0022, logged);
 * - `inactivity_timeout` is stored but has no effect while the service is served in request/response mode (RT0021,
 *   logged; the service then shows `0s` and an RT0021 info entry);
 * - `workflow_completion_retention` exists only for workflows (400 otherwise).
 */

/** The settings to change; those left out keep their value. */
export type ModifyServiceRequest = ServiceOverrides;

export type ModifyService = (name: string, req: ModifyServiceRequest) => Promise<ActiveService>;

function changes(req: ModifyServiceRequest): ServiceOverrides {
  const out: ServiceOverrides = {};
  if (req.public !== undefined) out.public = req.public;
  if (req.idempotencyRetentionMs !== undefined) out.idempotencyRetentionMs = req.idempotencyRetentionMs;
  if (req.workflowCompletionRetentionMs !== undefined) {
    out.workflowCompletionRetentionMs = req.workflowCompletionRetentionMs;
  }
  if (req.journalRetentionMs !== undefined) out.journalRetentionMs = req.journalRetentionMs;
  if (req.inactivityTimeoutMs !== undefined) out.inactivityTimeoutMs = req.inactivityTimeoutMs;
  if (req.abortTimeoutMs !== undefined) out.abortTimeoutMs = req.abortTimeoutMs;
  return out;
}

export function createModifyService(deps: SchemaOperationDeps): ModifyService {
  const log = deps.logger.child({ component: 'admin' });
  return async (name, req) => {
    const requested = changes(req);
    const max = deps.registry.defaults.maxJournalRetentionMs;
    const changed = await deps.store.transaction(async (tx) => {
      const latest = (await tx.latestServices([name])).get(name);
      if (latest === undefined) throw new SchemaNotFoundError(`service with name '${name}'`);
      if (requested.workflowCompletionRetentionMs !== undefined && latest.ty !== 'Workflow') {
        throw new RetentionNotModifiableError(latest.ty);
      }
      if (Object.keys(requested).length === 0) return false;
      const fields = { [LOG_FIELDS.serviceName]: name, revision: latest.revision };
      if (requested.journalRetentionMs !== undefined && max !== undefined && requested.journalRetentionMs > max) {
        log.warn(
          { ...fields, [LOG_FIELDS.errorCode]: 'RT0022' },
          `[RT0022] the journal retention ${formatDuration(requested.journalRetentionMs)} requested for service ` +
            `'${name}' exceeds the maximum ${formatDuration(max)} (RATCHET_MAX_JOURNAL_RETENTION) and is clamped to it`,
        );
        requested.journalRetentionMs = max;
      }
      if (requested.inactivityTimeoutMs !== undefined) {
        const deployment = await tx.deployment(latest.deploymentId);
        if (deployment?.protocolType === 'RequestResponse') {
          log.warn(
            { ...fields, [LOG_FIELDS.errorCode]: 'RT0021', [LOG_FIELDS.deploymentId]: latest.deploymentId },
            `[RT0021] the inactivity timeout ${formatDuration(requested.inactivityTimeoutMs)} set for service ` +
              `'${name}' is ignored: its deployment is in request/response mode`,
          );
        }
      }
      await tx.setServiceOverrides(name, { ...latest.overrides, ...requested });
      await tx.announce();
      return true;
    });
    if (changed) {
      log.info({ [LOG_FIELDS.serviceName]: name, changes: requested }, 'service settings changed');
      await deps.registry.load();
    }
    const service = deps.registry.service(name);
    // Removed by a concurrent change after our commit.
    if (service === undefined) throw new SchemaNotFoundError(`service with name '${name}'`);
    return service;
  };
}
