import { RatchetError } from '../errors/errors.ts';

/**
 * Requests the admin API cannot even read: restate-server rejects these in axum's extractors, with a `text/plain`
 * body (not the JSON error body) and fixed phrases. The admin error handler renders every subclass as text.
 */
export abstract class RequestExtractionError extends RatchetError {
  readonly code = undefined;
}

/** 415: the body is not declared as JSON. */
export class UnsupportedMediaTypeError extends RequestExtractionError {
  readonly status = 415;

  constructor() {
    super('Expected request with `Content-Type: application/json`');
  }
}

/** 400: the body is not JSON at all. */
export class MalformedJsonBodyError extends RequestExtractionError {
  readonly status = 400;

  constructor(detail: string) {
    super(`Failed to parse the request body as JSON: ${detail}`);
  }
}

/** 422: the body is JSON of the wrong shape. */
export class JsonBodyShapeError extends RequestExtractionError {
  readonly status = 422;

  constructor(detail: string) {
    super(`Failed to deserialize the JSON body into the target type: ${detail}`);
  }
}

/** 400: a path parameter that does not parse (a malformed deployment id). */
export class InvalidPathParameterError extends RequestExtractionError {
  readonly status = 400;

  constructor(parameter: string, value: string, reason: string) {
    super(`Invalid URL: Cannot parse \`${parameter}\` with value \`${value}\`: ${reason}`);
  }
}

/** 400: a `/v1/...` path; restate-server 1.7 serves admin API versions 2 to 4 only. */
export class UnsupportedAdminApiVersionError extends RequestExtractionError {
  readonly status = 400;

  constructor(version: number) {
    super(`Unsupported Admin API version V${version}. This server supports versions between V2 and V4.`);
  }
}

/** 400: a query parameter that does not parse (`?force=yes`), in axum's words. */
export class InvalidQueryStringError extends RequestExtractionError {
  readonly status = 400;

  constructor(detail: string) {
    super(`Failed to deserialize query string: ${detail}`);
  }
}
