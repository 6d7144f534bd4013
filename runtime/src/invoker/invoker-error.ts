import type { ErrorCode } from '../errors/codes.ts';

/**
 * Why an attempt ended without a terminal message the engine accepted: a transport error, a timeout, a bad response,
 * a protocol violation. It carries the RT code recorded on the invocation and the failure code the protocol gives it
 * (500, or 571 for a protocol violation); every such failure is retried under the handler's retry policy.
 */
export class InvokerError extends Error {
  override readonly name = 'InvokerError';
  /** The failure code as the protocol names it (500, 571…). */
  readonly code: number;
  /** Delay requested by whatever stands in front of the deployment (Retry-After on 429/503), in ms. */
  readonly retryAfterMs: number | undefined;

  constructor(
    readonly rtCode: ErrorCode,
    message: string,
    options: { code?: number; retryAfterMs?: number | undefined } = {},
  ) {
    super(message);
    this.code = options.code ?? 500;
    this.retryAfterMs = options.retryAfterMs;
  }
}
