import { LOG_FIELDS } from '../telemetry/logger.ts';
import { SchemaNotFoundError } from './errors.ts';
import { commitSchemaChange, type SchemaOperationDeps } from './operation-deps.ts';

/**
 * `DELETE /deployments/{id}?force=true`: removes a deployment at once. Services whose latest revision it served
 * fall back to the highest revision another deployment still registers (with that revision's own settings), or
 * disappear. Subscriptions are kept, as restate does.
 *
 * Invocations that are not completed and are pinned to the deployment cannot make progress afterwards (there is
 * nothing left to call). The deletion still goes ahead, as `force` asks, but it reports them: the result carries
 * their number and the oldest ids, the admin API puts the number in a response header, and a warning is logged.
 */

export interface PinnedInvocations {
  /** Not completed invocations pinned to the deployment when it was deleted. */
  count: number;
  /** The ids of the oldest of them (at most `PINNED_SAMPLE`). */
  sample: string[];
}

export interface DeleteDeploymentResult {
  pinned: PinnedInvocations;
}

export type DeleteDeployment = (id: string) => Promise<DeleteDeploymentResult>;

export const PINNED_SAMPLE = 10;

export function createDeleteDeployment(deps: SchemaOperationDeps): DeleteDeployment {
  const log = deps.logger.child({ component: 'registration' });
  return async (id) => {
    const { pinned, services } = await commitSchemaChange(deps, async (tx) => {
      const deployment = await tx.deployment(id);
      if (deployment === undefined) throw new SchemaNotFoundError(`deployment with id '${id}'`);
      const p = await tx.pinnedInvocations(id, PINNED_SAMPLE);
      const names = deployment.services.map((s) => s.name);
      await tx.deleteDeployment(id);
      await tx.refreshServices(names, new Set());
      return { pinned: p, services: names };
    });
    const fields = { [LOG_FIELDS.deploymentId]: id, services, pinnedInvocations: pinned.count };
    if (pinned.count > 0) {
      log.warn(
        { ...fields, sample: pinned.sample },
        `deployment deleted while ${pinned.count} invocation(s) not completed yet were pinned to it; they cannot ` +
          'make progress until they are cancelled or killed',
      );
    } else {
      log.info(fields, 'deployment deleted');
    }
    return { pinned };
  };
}
