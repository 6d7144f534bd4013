import { appendFileSync } from 'node:fs';
import fc from 'fast-check';
import { afterAll, beforeAll, expect } from 'vitest';

/**
 * How the fuzz tests run: the number of inputs per property comes from `RATCHET_FUZZ_RUNS` (a property that costs
 * more per input, such as one over a real socket, takes a fraction of it), the seed from `RATCHET_FUZZ_SEED` (random
 * otherwise; fast-check prints seed and path of a failing input, which replays it). With `RATCHET_FUZZ_REPORT` set
 * to a file, each property appends one JSON line (surface, property, inputs, milliseconds, seed): the figures of a
 * long run.
 */

const RUNS = positiveInt(process.env['RATCHET_FUZZ_RUNS']);
const SEED = process.env['RATCHET_FUZZ_SEED'];
const REPORT = process.env['RATCHET_FUZZ_REPORT'];

function positiveInt(text: string | undefined): number | undefined {
  if (text === undefined || text.trim() === '') return undefined;
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1) throw new Error(`RATCHET_FUZZ_RUNS must be a positive integer, not '${text}'`);
  return n;
}

/** Inputs for a property: its CI default, or `RATCHET_FUZZ_RUNS` × `weight` (at least 1) when that is set. */
export function runsFor(ciDefault: number, weight = 1): number {
  return RUNS === undefined ? ciDefault : Math.max(1, Math.round(RUNS * weight));
}

export interface FuzzOptions {
  /** Inputs in CI (no `RATCHET_FUZZ_RUNS`). */
  readonly runs: number;
  /** Share of `RATCHET_FUZZ_RUNS` for this property (its cost relative to a plain parser call). */
  readonly weight?: number;
}

function seedOf(surface: string, property: string): number {
  if (SEED !== undefined && SEED !== '') return Number(SEED) | 0;
  let h = 0;
  for (const c of `${surface}/${property}`) h = (Math.imul(h, 31) + c.charCodeAt(0)) | 0;
  return (h ^ (Math.random() * 0x7fffffff)) | 0;
}

function record(surface: string, property: string, inputs: number, ms: number, seed: number): void {
  if (REPORT === undefined || REPORT === '') return;
  appendFileSync(REPORT, `${JSON.stringify({ surface, property, inputs, ms: Math.round(ms), seed })}\n`);
}

/** `fc.assert` of a synchronous property with the run settings above. */
export function fuzz<Ts>(
  surface: string,
  property: string,
  prop: fc.IPropertyWithHooks<Ts>,
  options: FuzzOptions,
): void {
  const numRuns = runsFor(options.runs, options.weight);
  const seed = seedOf(surface, property);
  const started = performance.now();
  fc.assert(prop, { numRuns, seed, endOnFailure: true });
  record(surface, property, numRuns, performance.now() - started, seed);
}

/** `fc.assert` of an asynchronous property with the run settings above. */
export async function fuzzAsync<Ts>(
  surface: string,
  property: string,
  prop: fc.IAsyncPropertyWithHooks<Ts>,
  options: FuzzOptions,
): Promise<void> {
  const numRuns = runsFor(options.runs, options.weight);
  const seed = seedOf(surface, property);
  const started = performance.now();
  await fc.assert(prop, { numRuns, seed, endOnFailure: true });
  record(surface, property, numRuns, performance.now() - started, seed);
}

/** A test's time limit for `inputs` inputs of about `msPerInput` each, plus a fixed allowance. */
export function timeoutFor(ciDefault: number, weight: number, msPerInput: number): number {
  return 30_000 + runsFor(ciDefault, weight) * msPerInput;
}

/** Time limit of a test of parser properties: a minute, and a millisecond more per input of a long run. */
export const PARSER_TIMEOUT = 60_000 + runsFor(0);

/**
 * Records uncaught exceptions and unhandled rejections while the file's tests run (vitest reports them too, but
 * only at the end and without the input): `check()` after each input fails that input.
 */
export function watchProcessErrors(): { check(): Promise<void> } {
  const seen: unknown[] = [];
  const onError = (err: unknown): void => {
    seen.push(err);
  };
  beforeAll(() => {
    process.on('uncaughtException', onError);
    process.on('unhandledRejection', onError);
  });
  afterAll(() => {
    process.off('uncaughtException', onError);
    process.off('unhandledRejection', onError);
    expect(seen).toEqual([]);
  });
  return {
    async check() {
      // Rejections are reported after the microtask queue drained: give them a turn of the event loop.
      await new Promise((resolve) => setImmediate(resolve));
      if (seen.length > 0) {
        const errors = seen.splice(0);
        throw new Error(`uncaught exception or unhandled rejection: ${errors.map(String).join('; ')}`, {
          cause: errors[0],
        });
      }
    },
  };
}

/**
 * What an error thrown on bad input must be: one of `allowed` (the parser's own classes), with a message, and not
 * one of JavaScript's own errors escaping from inside (a TypeError or RangeError means a case nobody handled).
 */
export function expectOwnError(err: unknown, allowed: readonly (abstract new (...args: never[]) => Error)[]): void {
  if (!allowed.some((cls) => err instanceof cls)) {
    throw new Error(`unexpected error ${describeError(err)}`, { cause: err });
  }
  expect((err as Error).message.trim()).not.toBe('');
}

export function describeError(err: unknown): string {
  if (err instanceof Error) return `${err.name}: ${err.message}\n${err.stack ?? ''}`;
  return String(err);
}
