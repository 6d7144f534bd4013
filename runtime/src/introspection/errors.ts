import { RatchetError } from '../errors/errors.ts';

/**
 * Errors of introspection queries. restate answers `POST /query` errors with `{"message": …}` and no error code;
 * so does Ratchet, with PostgreSQL's message (and SQLSTATE) instead of DataFusion's.
 */

/** 400: the statement does not parse, names something unknown, is not allowed, or ran into the statement timeout. */
export class IntrospectionQueryError extends RatchetError {
  readonly code = undefined;
  readonly status = 400;

  constructor(
    message: string,
    /** PostgreSQL's SQLSTATE, when PostgreSQL refused the statement. */
    readonly sqlState: string | undefined,
    options: { cause?: unknown } = {},
  ) {
    super(message, options);
  }
}

/** 400: more rows than `RATCHET_INTROSPECTION_ROW_LIMIT`; nothing is returned rather than a silently cut result. */
export class IntrospectionRowLimitError extends RatchetError {
  readonly code = undefined;
  readonly status = 400;

  constructor(limit: number) {
    super(
      `The query returns more than ${limit} rows, the limit of introspection results ` +
        `(RATCHET_INTROSPECTION_ROW_LIMIT): add a LIMIT or a narrower WHERE clause`,
    );
  }
}

/** 503: the database cannot be reached, or introspection is not set up (the role could not be created). */
export class IntrospectionUnavailableError extends RatchetError {
  readonly code = undefined;
  readonly status = 503;
}
