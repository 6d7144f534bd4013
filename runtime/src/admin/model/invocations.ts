import { Type, type Static } from '@sinclair/typebox';
import { Component, Nullable } from './json-schema.ts';

/*
 * Invocation management: `PATCH /invocations/{id}/{cancel|kill|pause|resume|purge|purge-journal|restart-as-new}` and
 * the deprecated `DELETE /invocations/{id}`. Only restart-as-new answers with a body.
 */

export const InvocationParams = Type.Object({ id: Type.String({ description: 'Invocation identifier.' }) });
export type InvocationParams = Static<typeof InvocationParams>;

/**
 * `deployment` is also read in restate's bracketed form (`deployment[Id]=dp_…`) and as URL-encoded JSON
 * (`deployment={"Id":"dp_…"}`), which a query schema cannot say.
 */
export const ResumeInvocationQuery = Type.Object({
  deployment: Type.Optional(Nullable(Type.String(), { description: '`Keep`, `Latest` or a deployment id.' })),
});

export const RestartAsNewInvocationQuery = Type.Object({
  from: Type.Optional(Nullable(Type.Integer(), { description: 'Copy the journal up to this entry index.' })),
  deployment: Type.Optional(
    Nullable(Type.String(), { description: '`Keep`, `Latest` or a deployment id; only with `from`.' }),
  ),
});
export type RestartAsNewInvocationQuery = Static<typeof RestartAsNewInvocationQuery>;

export const DeleteInvocationQuery = Type.Object({
  mode: Type.Optional(Nullable(Type.String(), { description: '`Cancel`, `Kill` or `Purge`.' })),
});

export const RestartAsNewInvocationResponse = Component(
  'RestartAsNewInvocationResponse',
  Type.Object({ new_invocation_id: Type.String() }),
);
export type RestartAsNewInvocationResponse = Static<typeof RestartAsNewInvocationResponse>;
