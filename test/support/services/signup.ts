import * as restate from '@restatedev/restate-sdk';

/**
 * The Signup workflow of the test suite: `run` records its `status`, waits for the durable promise `approval` and
 * answers `{ user, approvedWith, req }`; `approve` resolves the promise. Suites add their own shared handlers with
 * `signupWorkflow`.
 */

type SharedHandler = (ctx: restate.WorkflowSharedContext, input: never) => Promise<unknown>;

export const run = async (ctx: restate.WorkflowContext, req: unknown) => {
  ctx.set('status', 'waiting');
  const approvedWith = await ctx.promise<string>('approval');
  ctx.set('status', 'approved');
  return { user: ctx.key, approvedWith, req };
};

/** Resolves the durable promise; a second call completes an already completed promise. */
export const approve = async (ctx: restate.WorkflowSharedContext, value: string): Promise<string> => {
  await ctx.promise<string>('approval').resolve(value);
  return 'approved';
};

/** A shared `status` handler: the status `run` recorded, `unset` before it ran. */
export function statusOr(unset: string): (ctx: restate.WorkflowSharedContext) => Promise<string> {
  return async (ctx) => (await ctx.get<string>('status')) ?? unset;
}

export type SignupHandlers<H> = { run: typeof run; approve: typeof approve } & H;

export function signupWorkflow<H extends Record<string, SharedHandler> = Record<never, never>>(
  settings: { readonly handlers?: H } = {},
): restate.WorkflowDefinition<'Signup', SignupHandlers<H>> {
  const handlers = { run, approve, ...settings.handlers } as SignupHandlers<H>;
  return restate.workflow({ name: 'Signup', handlers: handlers as restate.WorkflowOpts<SignupHandlers<H>> });
}

/** `run` and `approve`. */
export const signup = signupWorkflow();
