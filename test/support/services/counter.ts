import * as restate from '@restatedev/restate-sdk';

/**
 * The Counter virtual object of the test suite: `add` adds to the key's `count` state and answers the new value,
 * the shared `get` reads it (0 before the first `add`). Suites add their own handlers with `counterObject`.
 */

type ObjectHandler =
  | ((ctx: restate.ObjectContext, input: never) => Promise<unknown>)
  | ((ctx: restate.ObjectSharedContext, input: never) => Promise<unknown>);

/** The state key the count is kept under. */
export const COUNT_STATE_KEY = 'count';

export const add = async (ctx: restate.ObjectContext, n: number): Promise<number> => {
  const next = ((await ctx.get<number>(COUNT_STATE_KEY)) ?? 0) + n;
  ctx.set(COUNT_STATE_KEY, next);
  return next;
};

export const get = restate.handlers.object.shared(
  async (ctx: restate.ObjectSharedContext): Promise<number> => (await ctx.get<number>(COUNT_STATE_KEY)) ?? 0,
);

export type CounterHandlers<H> = { add: typeof add; get: typeof get } & H;

export function counterObject<H extends Record<string, ObjectHandler> = Record<never, never>>(
  settings: { readonly handlers?: H } = {},
): restate.VirtualObjectDefinition<'Counter', CounterHandlers<H>> {
  const handlers = { add, get, ...settings.handlers } as CounterHandlers<H>;
  return restate.object({ name: 'Counter', handlers: handlers as restate.ObjectOpts<CounterHandlers<H>> });
}

/** `add` and `get`. */
export const counter = counterObject();
