import { KAFKA_CLUSTER_NAME_PATTERN } from '../config/config.ts';
import { parseDuration, UnitFormatError } from '../config/units.ts';
import { DeploymentTypeMismatchError, NotSupportedError } from '../schema/errors.ts';
import type { ModifyServiceRequest } from '../schema/modify-service.ts';
import type { RegisterDeploymentRequest } from '../schema/register.ts';
import type { UpdateDeploymentRequest } from '../schema/update-deployment.ts';
import {
  InvalidQueryStringError,
  JsonBodyShapeError,
  MalformedJsonBodyError,
  UnsupportedMediaTypeError,
} from './errors.ts';

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

// ---------------------------------------------------------------------------------------------------------------------
// Bodies of the other admin requests. Shape errors name the field and say what was expected, as serde does
// (`public: invalid type: string "yes", expected a boolean`); unknown fields are ignored.

/** serde's description of a JSON value in "invalid type" messages. */
function serdeKind(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'sequence';
  if (typeof value === 'string') return `string ${JSON.stringify(value)}`;
  if (typeof value === 'number') {
    return Number.isInteger(value) ? `integer \`${value}\`` : `floating point \`${value}\``;
  }
  if (typeof value === 'boolean') return `boolean \`${value}\``;
  return typeof value === 'object' ? 'map' : typeof value;
}

function fieldError(field: string, problem: string): JsonBodyShapeError {
  return new JsonBodyShapeError(`${field}: ${problem}`);
}

function typeError(field: string, value: unknown, expected: string): JsonBodyShapeError {
  return fieldError(field, `invalid type: ${serdeKind(value)}, expected ${expected}`);
}

function requireObject(body: unknown, struct: string): JsonObject {
  if (!isObject(body)) throw new JsonBodyShapeError(`invalid type: ${serdeKind(body)}, expected struct ${struct}`);
  return body;
}

function nullableBoolean(body: JsonObject, key: string): boolean | undefined {
  const value = body[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'boolean') throw typeError(key, value, 'a boolean');
  return value;
}

function requiredString(body: JsonObject, key: string): string {
  const value = body[key];
  if (value === undefined) throw new JsonBodyShapeError(`missing field \`${key}\``);
  if (typeof value !== 'string') throw typeError(key, value, 'a string');
  return value;
}

/** A map of strings (Kafka properties, subscription options); `nullable` accepts null as "none". */
function stringRecord(body: JsonObject, key: string, required: boolean, nullable: boolean): Record<string, string> {
  const value = body[key];
  if (value === undefined) {
    if (required) throw new JsonBodyShapeError(`missing field \`${key}\``);
    return {};
  }
  if (value === null && nullable) return {};
  if (!isObject(value)) throw typeError(key, value, 'a map');
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(value)) {
    if (typeof v !== 'string') throw typeError(`${key}.${k}`, v, 'a string');
    out[k] = v;
  }
  return out;
}

/** A duration in jiff's friendly format or ISO-8601 (`"2h"`, `"1m 30s"`, `"PT1M"`); null = unchanged. */
function nullableDuration(body: JsonObject, key: string): number | undefined {
  const value = body[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw typeError(key, value, 'a human-friendly duration string');
  try {
    return parseDuration(value);
  } catch (err) {
    if (err instanceof UnitFormatError) throw fieldError(key, err.message);
    throw err;
  }
}

/** `ModifyServiceRequest` (`PATCH /services/{name}`); `retry_policy` is not patchable and, like restate, ignored. */
export function parseModifyServiceRequest(body: unknown): ModifyServiceRequest {
  const b = requireObject(body, 'ModifyServiceRequest');
  const req: ModifyServiceRequest = {};
  const isPublic = nullableBoolean(b, 'public');
  if (isPublic !== undefined) req.public = isPublic;
  const durations = [
    ['idempotency_retention', 'idempotencyRetentionMs'],
    ['workflow_completion_retention', 'workflowCompletionRetentionMs'],
    ['journal_retention', 'journalRetentionMs'],
    ['inactivity_timeout', 'inactivityTimeoutMs'],
    ['abort_timeout', 'abortTimeoutMs'],
  ] as const;
  for (const [field, key] of durations) {
    const ms = nullableDuration(b, field);
    if (ms !== undefined) req[key] = ms;
  }
  return req;
}

const UPDATE_VARIANTS = 'data did not match any variant of untagged enum UpdateDeploymentRequest';

function updateShapeError(detail: string): JsonBodyShapeError {
  return new JsonBodyShapeError(`${UPDATE_VARIANTS} (${detail})`);
}

/**
 * `UpdateDeploymentRequest` (`PATCH /deployments/{id}`, HTTP variant): `uri`, `additional_headers` (replaces all;
 * null = unchanged), `use_http_11`, `overwrite`, `dry_run`. Ratchet deployments are HTTP only, so Lambda options
 * are refused the way restate refuses them for an HTTP deployment.
 */
export function parseUpdateDeploymentRequest(body: unknown): UpdateDeploymentRequest {
  if (!isObject(body)) throw updateShapeError('expected a JSON object');
  for (const key of ['arn', 'assume_role_arn']) {
    const value = body[key];
    if (value !== undefined && value !== null) {
      if (typeof value !== 'string') throw updateShapeError(`\`${key}\` must be a string or null`);
      throw new DeploymentTypeMismatchError();
    }
  }
  const uri = body['uri'];
  if (uri !== undefined && uri !== null && typeof uri !== 'string') {
    throw updateShapeError('`uri` must be a string or null');
  }
  const req: UpdateDeploymentRequest = {
    overwrite: optionalBoolean(body, 'overwrite', false) ?? false,
    dryRun: optionalBoolean(body, 'dry_run', false) ?? false,
  };
  if (typeof uri === 'string') req.uri = uri;
  const useHttp11 = optionalBoolean(body, 'use_http_11', true);
  if (useHttp11 !== undefined) req.useHttp11 = useHttp11;
  const headers = body['additional_headers'];
  if (headers !== undefined && headers !== null) {
    try {
      req.additionalHeaders = stringMap(body, 'additional_headers', true, true);
    } catch (err) {
      // Same checks as registration, reported against this request type.
      if (err instanceof JsonBodyShapeError) throw updateShapeError(err.message.replace(/^.*\((.*)\)$/s, '$1'));
      throw err;
    }
  }
  return req;
}

export interface CreateKafkaClusterRequest {
  name: string;
  properties: Record<string, string>;
}

/** A Kafka cluster name: it is the authority of `kafka://<name>/<topic>`, so it must be hostname-like. */
export function parseKafkaClusterName(field: string, name: string): string {
  if (name === '') throw fieldError(field, 'empty string');
  if (name.length > 253 || !KAFKA_CLUSTER_NAME_PATTERN.test(name)) {
    throw fieldError(
      field,
      `'${name}' is not a valid cluster name: use letters, digits, '.', '_' and '-', starting and ending with a ` +
        'letter or digit (a hostname)',
    );
  }
  return name;
}

export function parseCreateKafkaClusterRequest(body: unknown): CreateKafkaClusterRequest {
  const b = requireObject(body, 'CreateKafkaClusterRequest');
  const name = parseKafkaClusterName('name', requiredString(b, 'name'));
  return { name, properties: stringRecord(b, 'properties', true, false) };
}

export function parseUpdateKafkaClusterRequest(body: unknown): Record<string, string> {
  return stringRecord(requireObject(body, 'UpdateKafkaClusterRequest'), 'properties', true, false);
}

export interface CreateSubscriptionRequest {
  source: string;
  sink: string;
  options: Record<string, string>;
}

/** `CreateSubscriptionRequest`; the URIs themselves are checked by the registry (META0009). */
export function parseCreateSubscriptionRequest(body: unknown): CreateSubscriptionRequest {
  const b = requireObject(body, 'CreateSubscriptionRequest');
  return {
    source: requiredString(b, 'source'),
    sink: requiredString(b, 'sink'),
    options: stringRecord(b, 'options', false, true),
  };
}

/** A boolean query parameter, `true` or `false` exactly (axum's Query): anything else is 400. */
export function parseBooleanQuery(name: string, value: unknown): boolean | undefined {
  if (value === undefined) return undefined;
  if (value === 'true') return true;
  if (value === 'false') return false;
  throw new InvalidQueryStringError(`${name}: provided string was not \`true\` or \`false\``);
}
