import * as restate from '@restatedev/restate-sdk';

/**
 * The Blocker service of the operator tests: `wait` journals a step that posts an awakeable's id under the input key
 * (restate pins the deployment on the first journaled command), then blocks until the test completes the awakeable
 * and answers `got <value>`.
 */

type ServiceHandler = (ctx: restate.Context, input: never) => Promise<unknown>;

export type BlockerHandlers<H> = { wait: (ctx: restate.Context, key: string) => Promise<string> } & H;

export function blockerService<H extends Record<string, ServiceHandler> = Record<never, never>>(
  awakeables: Map<string, string>,
  handlers?: H,
): restate.ServiceDefinition<'Blocker', BlockerHandlers<H>> {
  const all = {
    wait: async (ctx: restate.Context, key: string): Promise<string> => {
      const { id, promise } = ctx.awakeable<string>();
      await ctx.run('post', () => {
        awakeables.set(key, id);
      });
      return `got ${await promise}`;
    },
    ...handlers,
  } as BlockerHandlers<H>;
  return restate.service({ name: 'Blocker', handlers: all as restate.ServiceOpts<BlockerHandlers<H>> });
}
