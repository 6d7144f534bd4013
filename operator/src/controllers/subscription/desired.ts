import type { SubscriptionResponse } from '../../admin-client/types.ts';
import type { SubscriptionSpec } from '../../api/v1alpha1/index.ts';
import { stableHash } from '../shared/hash.ts';

/*
 * The subscription a Subscription resource asks for, in the admin API's terms, and how to recognise it among the
 * runtime's subscriptions when status was lost (adoption instead of a duplicate).
 */

export interface DesiredSubscription {
  readonly source: string;
  readonly sink: string;
  readonly options: Record<string, string>;
  readonly optionsHash: string;
}

/** Options the runtime fills in when a subscription is created without them (restate and Ratchet alike). */
export const SERVER_DEFAULTED_OPTIONS: ReadonlySet<string> = new Set(['client.id', 'group.id']);

export function desiredSubscription(spec: SubscriptionSpec): DesiredSubscription {
  const options = { ...(spec.options ?? {}) };
  return {
    source: `kafka://${spec.source.kafka.cluster}/${spec.source.kafka.topic}`,
    sink: `service://${spec.sink.service.name}/${spec.sink.service.handler}`,
    options,
    optionsHash: stableHash(options),
  };
}

/** `actual` is what creating `desired` would have produced: every option equal, extras only server defaults. */
export function optionsMatch(desired: Record<string, string>, actual: Record<string, string>): boolean {
  for (const [k, v] of Object.entries(desired)) if (actual[k] !== v) return false;
  for (const k of Object.keys(actual)) if (!(k in desired) && !SERVER_DEFAULTED_OPTIONS.has(k)) return false;
  return true;
}

/** A runtime subscription this resource may adopt: same source and sink, matching options, not another's. */
export function findAdoptable(
  desired: DesiredSubscription,
  existing: readonly SubscriptionResponse[],
  claimed: ReadonlySet<string>,
): SubscriptionResponse | undefined {
  return existing.find(
    (s) =>
      !claimed.has(s.id) &&
      s.source === desired.source &&
      s.sink === desired.sink &&
      optionsMatch(desired.options, s.options),
  );
}
