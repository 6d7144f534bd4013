import * as restate from '@restatedev/restate-sdk';

/**
 * The three HTTP workloads, each one SDK handler and the request that drives it. Both runtimes get the same service
 * code (each its own instance, in its own process) and the same requests.
 */

export const WORKLOADS = ['noop', 'steps', 'add'] as const;
export type Workload = (typeof WORKLOADS)[number];

/**
 * `--workloads kafka` (not in the default list): records of a Kafka topic, each run as one invocation of a sink
 * (`bench/kafka.ts`). Its sinks: `noop`, the service handler `Bench.noop` (records without a key, spread over the
 * topic's partitions); `add`, the exclusive object handler `Counter.add` (each record's key is the object key,
 * `key-<i mod OBJECT_KEYS>`, so the records of one key run one after the other, in order).
 */
export const KAFKA_WORKLOAD = 'kafka';
export const KAFKA_SINKS = ['noop', 'add'] as const;
export type KafkaSink = (typeof KAFKA_SINKS)[number];

/** The virtual object `add` spreads its calls over this many keys, round robin. */
export const OBJECT_KEYS = 64;

const NOOP_INPUT = { greeting: 'hello', n: 42 };

const bench = restate.service({
  name: 'Bench',
  handlers: {
    /** Returns its input: the runtime's own cost per invocation (accept, journal input, invoke, output, result). */
    noop: async (_ctx: restate.Context, input: unknown) => input,
    /** Three `ctx.run` steps: three journal appends the runtime must commit before it acknowledges each. */
    steps: async (ctx: restate.Context, input: number) => {
      const a = await ctx.run('one', () => input + 1);
      const b = await ctx.run('two', () => a + 1);
      const c = await ctx.run('three', () => b + 1);
      return c;
    },
  },
});

const counter = restate.object({
  name: 'Counter',
  handlers: {
    /** Read state, add, write: an exclusive handler, so calls to one key queue behind each other. */
    add: async (ctx: restate.ObjectContext, delta: number) => {
      const current = (await ctx.get<number>('value')) ?? 0;
      const next = current + delta;
      ctx.set('value', next);
      return next;
    },
  },
});

export const SERVICES = [bench, counter];

export interface WorkloadRequest {
  readonly path: string;
  readonly body: string;
}

/** The request for the `n`-th call of a workload (only `add` varies: it cycles through the object keys). */
export function workloadRequest(workload: Workload, n: number): WorkloadRequest {
  switch (workload) {
    case 'noop':
      return { path: '/Bench/noop', body: JSON.stringify(NOOP_INPUT) };
    case 'steps':
      return { path: '/Bench/steps', body: '1' };
    case 'add':
      return { path: `/Counter/key-${n % OBJECT_KEYS}/add`, body: '1' };
  }
}

/** Whether a response body is what the handler returns, for the check before the measurement starts. */
export function isExpectedResponse(workload: Workload, body: unknown): boolean {
  switch (workload) {
    case 'noop':
      return JSON.stringify(body) === JSON.stringify(NOOP_INPUT);
    case 'steps':
      return body === 4;
    case 'add':
      return typeof body === 'number' && Number.isInteger(body) && body >= 1;
  }
}
