import { parseDeleteRules, parseUpsertRules } from '../../flow-control/requests.ts';
import type { RuleBookStore, StoredRule } from '../../flow-control/rule-book.ts';
import type { RuleResponse } from '../model/limits.ts';
import { sendJson } from '../reply.ts';
import { readJsonBody } from '../request.ts';
import type { AdminRoutes } from './context.ts';

/** The limiter's rule book, stored for the cluster; `changed` is told after every batch that was applied. */
export interface RuleBookAccess {
  readonly store: RuleBookStore;
  changed(): void;
}

export function renderRule(r: StoredRule): RuleResponse {
  return {
    pattern: r.pattern,
    limits: r.concurrency === undefined ? {} : { concurrency: r.concurrency },
    ...(r.description === undefined ? {} : { description: r.description }),
    disabled: r.disabled,
    version: r.version,
    last_modified_millis_since_epoch: r.lastModified.getTime(),
  };
}

export function limitRoutes(rules: RuleBookAccess): AdminRoutes {
  return (scope) => {
    scope.put('/limits/rules', async (req, reply) => {
      const batch = parseUpsertRules(readJsonBody(req.headers['content-type'], req.body as Buffer | undefined));
      const applied = await rules.store.upsert(batch);
      rules.changed();
      return sendJson(reply, applied.map(renderRule));
    });

    scope.post('/limits/rules/bulk-delete', async (req, reply) => {
      const batch = parseDeleteRules(readJsonBody(req.headers['content-type'], req.body as Buffer | undefined));
      const removed = await rules.store.bulkDelete(batch);
      rules.changed();
      return sendJson(reply, removed);
    });
  };
}
