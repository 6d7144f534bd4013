import * as restate from '@restatedev/restate-sdk';

/**
 * The Approvals service: `await` creates an awakeable, records its id under the request's name (inside `ctx.run`, so
 * once per invocation, not once per attempt) and answers `{ got: <the value it was completed with> }`. The test reads
 * the id from `awakeables` and completes it through the ingress.
 */

type ServiceHandler = (ctx: restate.Context, input: never) => Promise<unknown>;

export type ApprovalsHandlers<H> = {
  await: (ctx: restate.Context, name: string) => Promise<{ got: unknown }>;
} & H;

export function approvalsService<H extends Record<string, ServiceHandler> = Record<never, never>>(
  awakeables: Map<string, string>,
  handlers?: H,
): restate.ServiceDefinition<'Approvals', ApprovalsHandlers<H>> {
  const all = {
    await: async (ctx: restate.Context, name: string) => {
      const awakeable = ctx.awakeable<unknown>();
      await ctx.run('register', () => {
        awakeables.set(name, awakeable.id);
      });
      return { got: await awakeable.promise };
    },
    ...handlers,
  } as ApprovalsHandlers<H>;
  return restate.service({ name: 'Approvals', handlers: all as restate.ServiceOpts<ApprovalsHandlers<H>> });
}
