import * as restate from '@restatedev/restate-sdk';

/**
 * The Greeter service of the test suite: `greet` answers `Hello <name>!`. Suites that need more handlers on the same
 * service (the lab's `noInput`, a terminal failure, their own probes) add them with `greeterService`.
 */

type ServiceHandler = (ctx: restate.Context, input: never) => Promise<unknown>;

/** `Hello <name>!`, or `Hello anon!` when called without a body. */
export const greet = async (_ctx: restate.Context, name?: string): Promise<string> => `Hello ${name ?? 'anon'}!`;

/** A handler without input, as in restate's lab services. */
export const noInput = async (_ctx: restate.Context): Promise<string> => 'hi';

/** Fails terminally with code 418, the suite's terminal failure. */
export const fail = async (): Promise<never> => {
  throw new restate.TerminalError('this is a terminal failure', { errorCode: 418 });
};

export interface GreeterSettings<H extends Record<string, ServiceHandler>> {
  readonly description?: string;
  readonly options?: restate.ServiceOptions;
  /** Handlers after `greet`, in this order. */
  readonly handlers?: H;
}

export type GreeterHandlers<H> = { greet: typeof greet } & H;

export function greeterService<H extends Record<string, ServiceHandler> = Record<never, never>>(
  settings: GreeterSettings<H> = {},
): restate.ServiceDefinition<'Greeter', GreeterHandlers<H>> {
  const handlers = { greet, ...settings.handlers } as GreeterHandlers<H>;
  return restate.service({
    name: 'Greeter',
    handlers: handlers as restate.ServiceOpts<GreeterHandlers<H>>,
    ...(settings.description === undefined ? {} : { description: settings.description }),
    ...(settings.options === undefined ? {} : { options: settings.options }),
  });
}

/** `greet` only. */
export const greeter = greeterService();

/** The Greeter of restate's lab (the spec transcripts): documented, with `greet` and `noInput`. */
export const labGreeter = greeterService({ description: 'A greeter service', handlers: { noInput } });
