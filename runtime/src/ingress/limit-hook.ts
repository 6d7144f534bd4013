import type { FastifyRequest } from 'fastify';
import { forwardedByPeer } from '../cluster/forward.ts';
import { IngressError } from './errors.ts';
import type { IngressLimiter } from '../rate-limit/limiter.ts';

/** 429: the cluster's ingress budget is used up; `retryAfterSeconds` goes out as `Retry-After`. */
export class IngressLimitError extends IngressError {
  constructor(
    message: string,
    readonly retryAfterSeconds: number,
  ) {
    super(429, message);
  }
}

export interface IngressLimitHookOptions {
  limiter: IngressLimiter;
  clusterName: string;
  /** The cluster's forwarding secret: requests a peer forwards were counted there. */
  forwardingSecret: string | undefined;
  count: (result: 'admitted' | 'refused') => void;
}

/**
 * Counts every ingress request against the cluster's budget once: after authentication (anonymous requests cost the
 * cluster nothing), not the health check or CORS preflights, and not requests another node of the cluster forwarded.
 */
export function ingressLimitHook(options: IngressLimitHookOptions): (req: FastifyRequest) => Promise<void> {
  const { limiter, clusterName } = options;
  const perHour = limiter.limit.perHour;
  return async (req) => {
    if (req.method === 'OPTIONS') return;
    const url = req.originalUrl;
    if (url === '/restate/health' || url.startsWith('/restate/health?')) return;
    if (options.forwardingSecret !== undefined && forwardedByPeer(options.forwardingSecret, req.headers)) return;
    const admission = await limiter.admit();
    options.count(admission.admitted ? 'admitted' : 'refused');
    if (!admission.admitted) {
      throw new IngressLimitError(
        `the ingress of cluster '${clusterName}' takes ${perHour} requests per hour (at most ` +
          `${limiter.limit.burst} at once) and that budget is used up; retry after ${admission.retryAfterSeconds} s ` +
          '(RATCHET_INGRESS_RATE_LIMIT, RATCHET_INGRESS_RATE_BURST)',
        admission.retryAfterSeconds,
      );
    }
  };
}
