import { RatchetError } from '../errors/errors.ts';

/** An ingress request that cannot be served; rendered as `{code, message, source: "ingress"}`. */
export class IngressError extends RatchetError {
  readonly code = undefined;
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}
