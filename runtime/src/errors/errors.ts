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

/**
 * 404 without a code, in restate-server's words: "The requested deployment 'x' does not exist". Subclasses name the
 * kind of thing (and the thing) that was asked for.
 */
export abstract class RequestedNotFoundError extends RatchetError {
  readonly code = undefined;
  readonly status = 404;

  constructor(what: string) {
    super(`The requested ${what} does not exist`);
  }
}

/** 400 without a code for a request field with a value that can never work, as restate-server words it. */
export class InvalidRequestFieldError extends RatchetError {
  readonly code = undefined;
  readonly status = 400;

  constructor(field: string, reason: string, options: RatchetErrorOptions = {}) {
    super(`The request field '${field}' is invalid. Reason: ${reason}`, options);
  }
}
