import type { ErrorCode } from './codes.ts';

export interface RatchetErrorOptions {
  cause?: unknown;
}

/**
 * Base of every error Ratchet raises on purpose. Subclasses fix `code` and `status` so that callers never
 * choose an HTTP status; listeners map `status` to the wire at their edge only.
 */
export abstract class RatchetError extends Error {
  abstract readonly code: ErrorCode | undefined;
  abstract readonly status: number;

  constructor(message: string, options: RatchetErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
  }

  /** The message as Restate prints coded errors: `[META0003] …`. */
  get codedMessage(): string {
    return this.code === undefined ? this.message : `[${this.code}] ${this.message}`;
  }
}
