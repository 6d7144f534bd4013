import { Type, type Static } from '@sinclair/typebox';
import { Component, Nullable, Ref } from './json-schema.ts';

/*
 * The limiter's rule book (`PUT /limits/rules`, `POST /limits/rules/bulk-delete`) and virtual queues
 * (`POST /vqueues/{vqueue_id}/pause|resume`), as restate-server 1.7.12 describes them. The bodies are read by
 * flow-control/requests.ts (restate's wording of refusals); these schemas document them.
 */

export const UserLimits = Component(
  'UserLimits',
  Type.Object(
    {
      concurrency: Type.Optional(
        Nullable(Type.Integer({ format: 'int32', minimum: 1 }), {
          description: 'Maximum concurrent running invocations. `None` means unlimited.',
        }),
      ),
    },
    { description: 'Per-rule effective limits. A missing field means unlimited.' },
  ),
);

export const Precondition = Component(
  'Precondition',
  Type.Union(
    [
      Type.Object({ type: Type.Literal('none') }),
      Type.Object({ type: Type.Literal('matches'), version: Type.Integer({ minimum: 0 }) }),
      Type.Object({ type: Type.Literal('does_not_exist') }),
    ],
    {
      description:
        'Optimistic-concurrency guard: `matches` requires the rule at that version, `does_not_exist` requires it ' +
        'absent, `none` (or omitted) is unconditional.',
    },
  ),
);

export const UpsertRuleRequest = Component(
  'UpsertRuleRequest',
  Type.Object(
    {
      pattern: Type.String({
        description:
          'The scope/limit-key combinations the rule applies to: `scope`, `scope/l1` or `scope/l1/l2`, each ' +
          'component a name or `*`. Examples: `"*"`, `"scope1/*"`, `"scope1/foo/bar"`.',
      }),
      limits: Type.Optional(Ref(UserLimits)),
      description: Type.Optional(Nullable(Type.String(), { description: 'Free-form; not consulted at runtime.' })),
      disabled: Type.Optional(Type.Boolean({ description: '`true` parks the rule: the limiter treats it as absent.' })),
      precondition: Type.Optional(Ref(Precondition)),
    },
    { description: 'One entry in the body of `PUT /limits/rules`.' },
  ),
);

export const RuleResponse = Component(
  'RuleResponse',
  Type.Object({
    pattern: Type.String(),
    limits: Ref(UserLimits),
    description: Type.Optional(Nullable(Type.String())),
    disabled: Type.Boolean(),
    version: Type.Integer({ format: 'int32', minimum: 0, description: 'Bumped on runtime-relevant changes.' }),
    last_modified_millis_since_epoch: Type.Integer({ format: 'int64', minimum: 0 }),
  }),
);
export type RuleResponse = Static<typeof RuleResponse>;

export const DeleteRuleRequest = Component(
  'DeleteRuleRequest',
  Type.Object(
    {
      pattern: Type.String(),
      expected_version: Type.Optional(
        Nullable(Type.Integer({ minimum: 0 }), { description: 'When set, the rule must exist at this version.' }),
      ),
    },
    { description: 'One entry in the body of `POST /limits/rules/bulk-delete`.' },
  ),
);

export const VQueueParams = Type.Object({ vqueue_id: Type.String({ description: 'The virtual queue ID.' }) });
export type VQueueParams = Static<typeof VQueueParams>;
