/*
 * `metav1.Duration`-style text as the CRD schemas allow it (DURATION_PATTERN): `30s`, `5m`, `1h30m`, `1.5h`, `250ms`.
 */

const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 } as const;
const WHOLE = /^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$/;
const PART = /([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)/g;

/** Milliseconds of `text`, or `fallbackMs` when it is absent; a malformed value also falls back (the CRD rejects it). */
export function durationMs(text: string | undefined, fallbackMs: number): number {
  if (text === undefined || !WHOLE.test(text)) return fallbackMs;
  let total = 0;
  for (const [, amount, unit] of text.matchAll(PART)) total += Number(amount) * UNIT_MS[unit as keyof typeof UNIT_MS];
  return Math.round(total);
}
