/**
 * A request the observability API refuses: a malformed LogQL/TraceQL query (with the position of the error, as Loki
 * and Tempo report it), a bad parameter, or a range or limit over what is allowed. Answered with `status` and the
 * message as the body (plain text for Loki, as Loki does; Tempo's errors are plain text too).
 */
export class ObservabilityQueryError extends Error {
  override readonly name = 'ObservabilityQueryError';

  constructor(
    message: string,
    readonly status: 400 | 404 | 413 | 422 | 429 = 400,
  ) {
    super(message);
  }
}

/** What an API function answers: the listener sends it as is (JSON unless `body` is a string or bytes). */
export interface ApiResponse {
  readonly status: number;
  readonly body: unknown;
  readonly contentType?: string;
}

/** Query parameters as the listener got them (a repeated parameter, such as Loki's `match[]`, as an array). */
export type ApiParams = Readonly<Record<string, string | readonly string[] | undefined>>;
