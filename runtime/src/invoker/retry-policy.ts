import type { OnMaxAttempts } from '../schema/types.ts';

export interface RetryPolicy {
  initialIntervalMs: number;
  exponentiationFactor: number;
  maxIntervalMs: number;
  /** undefined = retry forever. */
  maxAttempts: number | undefined;
  onMaxAttempts: OnMaxAttempts;
}

export type RetryDecision = { kind: 'retry'; delayMs: number } | { kind: 'exhausted'; onMaxAttempts: OnMaxAttempts };

/**
 * `attempts` counts the attempts made so far (≥ 1 after a failure). A delay requested in front of the deployment
 * (Retry-After on 429/503) replaces the computed backoff but not the attempt limit. The SDK's next_retry_delay never
 * gets here: the engine takes it as is, without spending an attempt (restate-server does the same).
 */
export function decideRetry(policy: RetryPolicy, attempts: number, requestedDelayMs?: number): RetryDecision {
  if (policy.maxAttempts !== undefined && attempts >= policy.maxAttempts) {
    return { kind: 'exhausted', onMaxAttempts: policy.onMaxAttempts };
  }
  if (requestedDelayMs !== undefined) return { kind: 'retry', delayMs: Math.max(0, requestedDelayMs) };
  const exp = policy.initialIntervalMs * Math.pow(policy.exponentiationFactor, Math.max(0, attempts - 1));
  return { kind: 'retry', delayMs: Math.min(policy.maxIntervalMs, Math.round(exp)) };
}
