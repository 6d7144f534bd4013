import type { Static, TObject, TSchema } from '@sinclair/typebox';
import { KAFKA_CLUSTER_NAME_PATTERN } from '../config/config.ts';
import { parseDuration, UnitFormatError } from '../config/units.ts';
import { InvalidRequestFieldError } from '../errors/errors.ts';
import { NotSupportedError } from '../schema/errors.ts';
import type { ModifyServiceRequest as ServiceChanges } from '../schema/modify-service.ts';
import type { RegisterDeploymentRequest as Registration } from '../schema/register.ts';
import type { UpdateDeploymentRequest as DeploymentUpdate } from '../schema/update-deployment.ts';
import {
  InvalidQueryStringError,
  JsonBodyShapeError,
  MalformedJsonBodyError,
  UnsupportedMediaTypeError,
} from './errors.ts';
import {
  RegisterHttpDeploymentRequest,
  RegisterLambdaDeploymentRequest,
  UpdateHttpDeploymentRequest,
  UpdateLambdaDeploymentRequest,
  type RegisterDeploymentRequest,
} from './model/deployments.ts';
import { componentName, meaningOf, refTarget, type Meaning } from './model/json-schema.ts';
import { CreateKafkaClusterRequest, UpdateKafkaClusterRequest } from './model/kafka-clusters.ts';
import { ModifyServiceRequest } from './model/services.ts';
import { CreateSubscriptionRequest } from './model/subscriptions.ts';

/**
 * Reading admin requests the way restate's axum extractors do: the content type must be JSON (415), the body must
 * parse (400) and have the shape the admin API model (`model/`) gives the request type (422), each refusal worded
 * as restate words it, plus what to fix. Query parameters are read by the model's query schemas likewise (400).
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
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch (err) {
    throw new MalformedJsonBodyError(describeSyntaxError(text, err));
  }
  // Names, keys, SQL and map values are stored or sent to PostgreSQL, whose text cannot hold U+0000.
  if (text.includes('\\u0000')) {
    const at = nulPath(value, '');
    if (at !== undefined) {
      throw new InvalidRequestFieldError(at === '' ? 'body' : at, 'it contains U+0000 (NUL), which cannot be stored');
    }
  }
  return value;
}

/** The JSON path of the first string (or property name) holding U+0000. */
function nulPath(value: unknown, path: string): string | undefined {
  if (typeof value === 'string') return value.includes('\0') ? path : undefined;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = nulPath(value[i], `${path}[${i}]`);
      if (found !== undefined) return found;
    }
    return undefined;
  }
  if (typeof value === 'object' && value !== null) {
    for (const [k, v] of Object.entries(value)) {
      const child = path === '' ? k : `${path}.${k}`;
      if (k.includes('\0')) return child;
      const found = nulPath(v, child);
      if (found !== undefined) return found;
    }
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------------------------------------
// Shapes. A body is checked against its model schema property by property, in the schema's order, and the first
// problem is reported; unknown properties are ignored (as serde ignores them). Only the forms request schemas use
// are known: booleans, strings, integers and maps of strings, each possibly nullable (null then counts as absent).

type JsonObject = Record<string, unknown>;

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

type FieldKind = 'boolean' | 'string' | 'integer' | 'map';

/** What a property of a request schema accepts. */
interface Expected {
  readonly kind: FieldKind;
  readonly nullable: boolean;
  /** Maps: the schema of every value. */
  readonly values: TSchema | undefined;
  readonly meaning: Meaning | undefined;
}

function expectation(schema: TSchema): Expected {
  const target = refTarget(schema) ?? schema;
  const types: unknown[] = Array.isArray(target.type) ? target.type : [target.type];
  const kind = types.find((t) => t !== 'null');
  const meaning = meaningOf(schema) ?? meaningOf(target);
  const nullable = types.includes('null');
  const additional: unknown = target.additionalProperties;
  if (kind === 'object' && typeof additional === 'object' && additional !== null) {
    return { kind: 'map', nullable, values: additional as TSchema, meaning };
  }
  if (kind === 'boolean' || kind === 'string' || kind === 'integer')
    return { kind, nullable, values: undefined, meaning };
  throw new Error(`a request schema of the admin API model has a form this reader does not know: ${String(kind)}`);
}

function hasKind(value: unknown, kind: FieldKind): boolean {
  switch (kind) {
    case 'boolean':
      return typeof value === 'boolean';
    case 'string':
      return typeof value === 'string';
    case 'integer':
      return Number.isInteger(value);
    case 'map':
      return isObject(value);
  }
}

/** How a request type words its refusals: each function returns the detail, `refuse` makes the 422 of it. */
interface Wording {
  readonly refuse: (detail: string) => JsonBodyShapeError;
  readonly notObject: (body: unknown) => string;
  readonly missing: (field: string) => string;
  readonly wrongType: (path: string, value: unknown, expected: Expected) => string;
}

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

function serdeExpecting(expected: Expected): string {
  switch (expected.kind) {
    case 'boolean':
      return 'a boolean';
    case 'string':
      return expected.meaning === 'duration' ? 'a human-friendly duration string' : 'a string';
    case 'integer':
      return 'an integer';
    case 'map':
      return 'a map';
  }
}

/** serde's derived struct deserializer: `public: invalid type: string "yes", expected a boolean`. */
function serdeStruct(schema: TObject): Wording {
  const struct = componentName(schema);
  return {
    refuse: (detail) => new JsonBodyShapeError(detail),
    notObject: (body) => `invalid type: ${serdeKind(body)}, expected struct ${struct}`,
    missing: (field) => `missing field \`${field}\``,
    wrongType: (path, value, expected) =>
      `${path}: invalid type: ${serdeKind(value)}, expected ${serdeExpecting(expected)}`,
  };
}

const UNTAGGED_EXPECTING: Record<FieldKind, string> = {
  boolean: 'a boolean',
  string: 'a string',
  integer: 'an integer',
  map: 'an object of strings',
};

/**
 * restate's untagged enums (the two deployment requests): serde only says that no variant matched; Ratchet adds
 * in parentheses what to fix (`` `force` must be a boolean or null ``).
 */
function untaggedEnum(name: string): Wording {
  return {
    refuse: (detail) => new JsonBodyShapeError(`data did not match any variant of untagged enum ${name} (${detail})`),
    notObject: () => 'expected a JSON object',
    missing: (field) => `missing field \`${field}\``,
    wrongType: (path, _value, expected) =>
      `\`${path}\` must be ${UNTAGGED_EXPECTING[expected.kind]}${expected.nullable ? ' or null' : ''}`,
  };
}

/** RFC 9110 token characters: what a header name may contain. */
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** Visible ASCII, space, tab and obs-text: what an HTTP header value may contain (no CR, LF or NUL). */
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/**
 * What a field's meaning (`model/json-schema.ts`) asks beyond its JSON type: `value` checks the whole value, `entry`
 * every entry of a map (right after its own type). Each returns the full detail of the problem, or undefined.
 */
const MEANINGS: Record<
  Meaning,
  {
    readonly value?: (path: string, value: string) => string | undefined;
    readonly entry?: (path: string, name: string, value: string) => string | undefined;
  }
> = {
  duration: {
    value: (path, value) => {
      try {
        parseDuration(value);
        return undefined;
      } catch (err) {
        if (err instanceof UnitFormatError) return `${path}: ${err.message}`;
        throw err;
      }
    },
  },
  // It is the authority of `kafka://<name>/<topic>`, so it must be hostname-like.
  'kafka-cluster-name': {
    value: (path, name) => {
      if (name === '') return `${path}: empty string`;
      if (name.length <= 253 && KAFKA_CLUSTER_NAME_PATTERN.test(name)) return undefined;
      return (
        `${path}: '${name}' is not a valid cluster name: use letters, digits, '.', '_' and '-', starting and ending ` +
        'with a letter or digit (a hostname)'
      );
    },
  },
  'http-headers': {
    entry: (path, name, value) => {
      if (!HEADER_NAME.test(name)) return `\`${path}\`: '${name}' is not a valid HTTP header name`;
      if (!HEADER_VALUE.test(value)) return `\`${path}.${name}\` is not a valid HTTP header value`;
      return undefined;
    },
  },
};

function checkValue(value: unknown, schema: TSchema, path: string, wording: Wording): void {
  const expected = expectation(schema);
  if (value === null && expected.nullable) return;
  if (!hasKind(value, expected.kind)) throw wording.refuse(wording.wrongType(path, value, expected));
  const meaning = expected.meaning === undefined ? undefined : MEANINGS[expected.meaning];
  if (expected.kind === 'map' && expected.values !== undefined) {
    for (const [name, entry] of Object.entries(value as JsonObject)) {
      checkValue(entry, expected.values, `${path}.${name}`, wording);
      // Entry checks are for maps of strings, which the line above has just made sure of.
      const problem = meaning?.entry?.(path, name, entry as string);
      if (problem !== undefined) throw wording.refuse(problem);
    }
  }
  if (expected.kind === 'string') {
    const problem = meaning?.value?.(path, value as string);
    if (problem !== undefined) throw wording.refuse(problem);
  }
}

function checkProperty(body: JsonObject, schema: TObject, key: string, wording: Wording): void {
  const property = schema.properties[key];
  if (property === undefined) return;
  const value = body[key];
  if (value !== undefined) checkValue(value, property, key, wording);
  else if (schema.required?.includes(key) === true) throw wording.refuse(wording.missing(key));
}

/** Checks the properties of `schema` (those `only` keeps), in the schema's order. */
function checkProperties(body: JsonObject, schema: TObject, wording: Wording, only?: (key: string) => boolean): void {
  for (const key of Object.keys(schema.properties)) {
    if (only === undefined || only(key)) checkProperty(body, schema, key, wording);
  }
}

function requireObject(body: unknown, wording: Wording): JsonObject {
  if (!isObject(body)) throw wording.refuse(wording.notObject(body));
  return body;
}

/** `body` as the request type `schema` describes, or the refusal of its first problem. */
function readBody<T extends TObject>(body: unknown, schema: T, wording: Wording): Static<T> {
  const object = requireObject(body, wording);
  checkProperties(object, schema, wording);
  return object;
}

function present<T>(value: T | null | undefined): value is T {
  return value !== undefined && value !== null;
}

/** Header names are case-insensitive; restate stores them lower-cased. */
function headerMap(headers: Record<string, string> | null | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers ?? {})) out[name.toLowerCase()] = value;
  return out;
}

// ---------------------------------------------------------------------------------------------------------------------
// The request bodies, turned into the commands of `schema/`.

const REGISTER = untaggedEnum('RegisterDeploymentRequest');

function registrationFlags(req: RegisterDeploymentRequest, version: AdminApiVersion) {
  return {
    force: req.force ?? version === 2,
    breaking: req.breaking ?? false,
    dryRun: req.dry_run ?? false,
    metadata: { ...req.metadata },
    additionalHeaders: headerMap(req.additional_headers),
  };
}

/**
 * `RegisterDeploymentRequest`, an untagged enum: first what both variants carry, then the HTTP variant when `uri` is
 * a string, else the Lambda variant when `arn` is. `force` defaults to true through `/v2` (and `/v1`), to false
 * otherwise.
 */
export function parseRegisterDeploymentRequest(body: unknown, version: AdminApiVersion): Registration {
  const http = RegisterHttpDeploymentRequest;
  const lambda = RegisterLambdaDeploymentRequest;
  const b = requireObject(body, REGISTER);
  checkProperties(b, http, REGISTER, (key) => key in lambda.properties);
  if (typeof b['uri'] === 'string') {
    const auth = b['auth'];
    if (auth !== undefined && auth !== null) {
      throw new NotSupportedError(
        'per-deployment authentication (`auth`) is not supported by Ratchet; put the credentials the deployment ' +
          'expects in `additional_headers` instead',
      );
    }
    checkProperties(b, http, REGISTER, (key) => !(key in lambda.properties));
    const req = b as RegisterHttpDeploymentRequest;
    return { kind: 'http', uri: req.uri, useHttp11: req.use_http_11 ?? false, ...registrationFlags(req, version) };
  }
  if (typeof b['arn'] === 'string') {
    checkProperties(b, lambda, REGISTER, (key) => !(key in http.properties));
    const req = b as RegisterLambdaDeploymentRequest;
    return {
      kind: 'lambda',
      arn: req.arn,
      assumeRoleArn: req.assume_role_arn ?? undefined,
      ...registrationFlags(req, version),
    };
  }
  throw REGISTER.refuse('expected `uri` (HTTP deployment) or `arn` (Lambda deployment) as a string');
}

const UPDATE = untaggedEnum('UpdateDeploymentRequest');

/** The Lambda variant's own options (`arn`, `assume_role_arn`). */
const LAMBDA_UPDATE_OPTIONS = Object.keys(UpdateLambdaDeploymentRequest.properties).filter(
  (key) => !(key in UpdateHttpDeploymentRequest.properties),
);
/** The HTTP variant's own options (`uri`, `use_http_11`). */
const HTTP_UPDATE_OPTIONS = Object.keys(UpdateHttpDeploymentRequest.properties).filter(
  (key) => !(key in UpdateLambdaDeploymentRequest.properties),
);

/**
 * `UpdateDeploymentRequest` (`PATCH /deployments/{id}`), an untagged enum: the HTTP variant (`uri`, `use_http_11`)
 * or the Lambda variant (`arn`, `assume_role_arn`); options of both in one request are refused. Which variant fits
 * the deployment is checked by the update itself. `additional_headers` replaces all headers; null leaves it (like
 * every other null) unchanged.
 */
export function parseUpdateDeploymentRequest(body: unknown): DeploymentUpdate {
  const b = requireObject(body, UPDATE);
  const lambda = LAMBDA_UPDATE_OPTIONS.some((key) => present(b[key]));
  const http = HTTP_UPDATE_OPTIONS.some((key) => present(b[key]));
  if (lambda && http) {
    throw UPDATE.refuse(
      'an update has either HTTP options (`uri`, `use_http_11`) or Lambda options (`arn`, `assume_role_arn`), not both',
    );
  }
  const update: DeploymentUpdate = { overwrite: false, dryRun: false };
  if (lambda) {
    checkProperties(b, UpdateLambdaDeploymentRequest, UPDATE);
    const req = b as UpdateLambdaDeploymentRequest;
    update.kind = 'lambda';
    if (present(req.arn)) update.arn = req.arn;
    if (present(req.assume_role_arn)) update.assumeRoleArn = req.assume_role_arn;
    update.overwrite = req.overwrite ?? false;
    update.dryRun = req.dry_run ?? false;
    if (present(req.additional_headers)) update.additionalHeaders = headerMap(req.additional_headers);
    return update;
  }
  checkProperties(b, UpdateHttpDeploymentRequest, UPDATE);
  const req = b as UpdateHttpDeploymentRequest;
  if (http) update.kind = 'http';
  update.overwrite = req.overwrite ?? false;
  update.dryRun = req.dry_run ?? false;
  if (present(req.uri)) update.uri = req.uri;
  if (present(req.use_http_11)) update.useHttp11 = req.use_http_11;
  if (present(req.additional_headers)) update.additionalHeaders = headerMap(req.additional_headers);
  return update;
}

const SERVICE_DURATIONS = [
  ['idempotency_retention', 'idempotencyRetentionMs'],
  ['workflow_completion_retention', 'workflowCompletionRetentionMs'],
  ['journal_retention', 'journalRetentionMs'],
  ['inactivity_timeout', 'inactivityTimeoutMs'],
  ['abort_timeout', 'abortTimeoutMs'],
] as const;

/** `ModifyServiceRequest` (`PATCH /services/{name}`); `retry_policy` is not patchable and, like restate, ignored. */
export function parseModifyServiceRequest(body: unknown): ServiceChanges {
  const req = readBody(body, ModifyServiceRequest, serdeStruct(ModifyServiceRequest));
  const changes: ServiceChanges = {};
  if (present(req.public)) changes.public = req.public;
  for (const [field, key] of SERVICE_DURATIONS) {
    const value = req[field];
    if (present(value)) changes[key] = parseDuration(value);
  }
  return changes;
}

export function parseCreateKafkaClusterRequest(body: unknown): CreateKafkaClusterRequest {
  const req = readBody(body, CreateKafkaClusterRequest, serdeStruct(CreateKafkaClusterRequest));
  return { name: req.name, properties: req.properties };
}

export function parseUpdateKafkaClusterRequest(body: unknown): UpdateKafkaClusterRequest {
  const req = readBody(body, UpdateKafkaClusterRequest, serdeStruct(UpdateKafkaClusterRequest));
  return { properties: req.properties };
}

/** `CreateSubscriptionRequest`; the URIs themselves are checked by the registry (META0009). */
export function parseCreateSubscriptionRequest(
  body: unknown,
): CreateSubscriptionRequest & { options: Record<string, string> } {
  const req = readBody(body, CreateSubscriptionRequest, serdeStruct(CreateSubscriptionRequest));
  return { source: req.source, sink: req.sink, options: req.options ?? {} };
}

// ---------------------------------------------------------------------------------------------------------------------
// Query parameters, as axum's `Query` reads them (refusals are 400, in plain text).

/** A boolean query parameter, `true` or `false` exactly: anything else is refused. */
function booleanQuery(name: string, value: unknown): boolean {
  if (value === 'true') return true;
  if (value === 'false') return false;
  throw new InvalidQueryStringError(`${name}: provided string was not \`true\` or \`false\``);
}

/** An unsigned 32-bit integer, refused in the words of Rust's integer parser. */
function integerQuery(name: string, value: unknown): number {
  if (value === '') throw new InvalidQueryStringError(`${name}: cannot parse integer from empty string`);
  if (typeof value !== 'string' || !/^\+?\d+$/.test(value)) {
    throw new InvalidQueryStringError(`${name}: invalid digit found in string`);
  }
  const n = Number(value.replace(/^\+/, ''));
  if (n > 0xffffffff) throw new InvalidQueryStringError(`${name}: number too large to fit in target type`);
  return n;
}

/**
 * The query parameters `schema` declares: booleans (`true`/`false`), unsigned 32-bit integers, and strings (a
 * repeated one counts by its last value). Absent ones stay absent; undeclared ones are ignored.
 */
export function readQuery<T extends TObject>(schema: T, query: unknown): Static<T> {
  const raw = isObject(query) ? query : {};
  const out: JsonObject = {};
  for (const [name, property] of Object.entries(schema.properties)) {
    const value = raw[name];
    if (value === undefined) continue;
    const { kind } = expectation(property);
    switch (kind) {
      case 'boolean':
        out[name] = booleanQuery(name, value);
        break;
      case 'integer':
        out[name] = integerQuery(name, value);
        break;
      case 'string': {
        const last: unknown = Array.isArray(value) ? value[value.length - 1] : value;
        if (typeof last === 'string') out[name] = last;
        break;
      }
      case 'map':
        throw new Error(`query parameter ${name}: a map cannot be a query parameter`);
    }
  }
  return out;
}
