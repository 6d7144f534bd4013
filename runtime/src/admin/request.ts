import { NotSupportedError } from '../schema/errors.ts';
import type { RegisterDeploymentRequest } from '../schema/register.ts';
import { JsonBodyShapeError, MalformedJsonBodyError, UnsupportedMediaTypeError } from './errors.ts';

/**
 * Reading admin request bodies the way restate's axum extractors do: the content type must be JSON (415), the body
 * must parse (400) and have the expected shape (422), each rejected with restate's phrase plus what to fix.
 */

/** The admin API version a request came in through; `undefined` = the unprefixed path. */
export type AdminApiVersion = 2 | 3 | 4 | undefined;

/** axum's `Json` extractor accepts `application/json` and any `application/*+json`. */
function isJsonContentType(contentType: string | undefined): boolean {
  if (contentType === undefined) return false;
  const mime = (contentType.split(';')[0] ?? '').trim().toLowerCase();
  return mime === 'application/json' || (mime.startsWith('application/') && mime.endsWith('+json'));
}

function lineAndColumn(text: string, offset: number): string {
  const before = text.slice(0, Math.max(0, Math.min(offset, text.length)));
  const lines = before.split('\n');
  return `line ${lines.length} column ${(lines[lines.length - 1] ?? '').length}`;
}

/** A serde_json-like description of a JSON syntax error (restate's wording), with line and column. */
function describeSyntaxError(text: string, err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  if (text.trim() === '' || /end of (json )?input/i.test(message)) {
    return `EOF while parsing a value at ${lineAndColumn(text, text.length)}`;
  }
  const position = /at position (\d+)/.exec(message);
  const where = position === null ? '' : ` at ${lineAndColumn(text, Number(position[1]) + 1)}`;
  const what = message.replace(/,? ?".*" is not valid JSON$/s, '').replace(/( in JSON)? at position \d+.*$/s, '');
  return `${what}${where}`;
}

/** Parses a JSON request body; a missing or non-JSON content type is 415, unparsable JSON is 400. */
export function readJsonBody(contentType: string | undefined, body: Buffer | undefined): unknown {
  if (!isJsonContentType(contentType)) throw new UnsupportedMediaTypeError();
  const text = body === undefined ? '' : body.toString('utf8');
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new MalformedJsonBodyError(describeSyntaxError(text, err));
  }
}

const REGISTER_VARIANTS = 'data did not match any variant of untagged enum RegisterDeploymentRequest';

function shapeError(detail: string): JsonBodyShapeError {
  return new JsonBodyShapeError(`${REGISTER_VARIANTS} (${detail})`);
}

type JsonObject = Record<string, unknown>;

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function optionalBoolean(body: JsonObject, key: string, nullable: boolean): boolean | undefined {
  const value = body[key];
  if (value === undefined || (nullable && value === null)) return undefined;
  if (typeof value !== 'boolean') throw shapeError(`\`${key}\` must be a boolean${nullable ? ' or null' : ''}`);
  return value;
}

/** RFC 9110 token characters: what a header name may contain. */
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** Visible ASCII, space, tab and obs-text: what an HTTP header value may contain (no CR, LF or NUL). */
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

function stringMap(body: JsonObject, key: string, nullable: boolean, headers: boolean): Record<string, string> {
  const value = body[key];
  if (value === undefined || (nullable && value === null)) return {};
  if (!isObject(value)) throw shapeError(`\`${key}\` must be an object of strings${nullable ? ' or null' : ''}`);
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(value)) {
    if (typeof v !== 'string') throw shapeError(`\`${key}.${k}\` must be a string`);
    if (headers) {
      if (!HEADER_NAME.test(k)) throw shapeError(`\`${key}\`: '${k}' is not a valid HTTP header name`);
      if (!HEADER_VALUE.test(v)) throw shapeError(`\`${key}.${k}\` is not a valid HTTP header value`);
      // Header names are case-insensitive; restate stores them lower-cased.
      out[k.toLowerCase()] = v;
    } else {
      out[k] = v;
    }
  }
  return out;
}

/**
 * `RegisterDeploymentRequest`: the HTTP variant when `uri` is a string, else the Lambda variant when `arn` is.
 * Unknown fields are ignored. `force` defaults to true through `/v2` (and `/v1`), to false otherwise.
 */
export function parseRegisterDeploymentRequest(body: unknown, version: AdminApiVersion): RegisterDeploymentRequest {
  if (!isObject(body)) throw shapeError('expected a JSON object');
  const force = optionalBoolean(body, 'force', true) ?? version === 2;
  const flags = {
    force,
    breaking: optionalBoolean(body, 'breaking', false) ?? false,
    dryRun: optionalBoolean(body, 'dry_run', false) ?? false,
    metadata: stringMap(body, 'metadata', false, false),
    additionalHeaders: stringMap(body, 'additional_headers', true, true),
  };
  if (typeof body['uri'] === 'string') {
    const auth = body['auth'];
    if (auth !== undefined && auth !== null) {
      throw new NotSupportedError(
        'per-deployment authentication (`auth`) is not supported by Ratchet; put the credentials the deployment ' +
          'expects in `additional_headers` instead',
      );
    }
    return {
      kind: 'http',
      uri: body['uri'],
      useHttp11: optionalBoolean(body, 'use_http_11', false) ?? false,
      ...flags,
    };
  }
  if (typeof body['arn'] === 'string') {
    const assumeRoleArn = body['assume_role_arn'];
    if (assumeRoleArn !== undefined && assumeRoleArn !== null && typeof assumeRoleArn !== 'string') {
      throw shapeError('`assume_role_arn` must be a string or null');
    }
    return { kind: 'lambda', arn: body['arn'], assumeRoleArn: assumeRoleArn ?? undefined, ...flags };
  }
  throw shapeError('expected `uri` (HTTP deployment) or `arn` (Lambda deployment) as a string');
}
