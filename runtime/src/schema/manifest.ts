import { MAX_PROTOCOL_VERSION, MIN_PROTOCOL_VERSION, type ManifestVersion } from '../protocol/version.ts';
import type { DiscoveryTransport } from '../service-client/discovery.ts';
import { BadDiscoveryResponseError } from '../service-client/errors.ts';
import {
  BidiStreamOverRequestResponseError,
  IncompatibleProtocolVersionsError,
  InvalidServiceDefinitionError,
} from './errors.ts';
import type {
  HandlerSchema,
  HandlerType,
  InputRules,
  OnMaxAttempts,
  OutputRules,
  ProtocolType,
  RetryPolicyOverrides,
  ServiceSchema,
  ServiceType,
} from './types.ts';

/**
 * Validation of the endpoint manifest (discovery response, manifest v2–v4) into Ratchet's schema model. Every
 * problem names the offending field by its JSON path (`services[1].handlers[0].name`), so the SDK author can find it.
 */

export interface ParsedManifest {
  protocolType: ProtocolType;
  minProtocolVersion: number;
  maxProtocolVersion: number;
  services: ServiceSchema[];
}

export interface ManifestContext {
  manifestVersion: ManifestVersion;
  /** The transport discovery ran over; a BIDI_STREAM endpoint needs HTTP/2. */
  transport: DiscoveryTransport;
}

const SERVICE_NAME = /^([a-zA-Z]|_[a-zA-Z0-9])[a-zA-Z0-9._-]*$/;
const HANDLER_NAME = /^([a-zA-Z]|_[a-zA-Z0-9])[a-zA-Z0-9_]*$/;

const SERVICE_TYPES: Readonly<Record<string, ServiceType>> = {
  SERVICE: 'Service',
  VIRTUAL_OBJECT: 'VirtualObject',
  WORKFLOW: 'Workflow',
};
const HANDLER_TYPES: Readonly<Record<string, HandlerType>> = {
  EXCLUSIVE: 'Exclusive',
  SHARED: 'Shared',
  WORKFLOW: 'Workflow',
};
const PROTOCOL_MODES: Readonly<Record<string, ProtocolType>> = {
  BIDI_STREAM: 'BidiStream',
  REQUEST_RESPONSE: 'RequestResponse',
};
const ON_MAX_ATTEMPTS: Readonly<Record<string, OnMaxAttempts>> = { PAUSE: 'Pause', KILL: 'Kill' };

const OPTION_FIELDS = [
  'inactivityTimeout',
  'abortTimeout',
  'journalRetention',
  'idempotencyRetention',
  'enableLazyState',
  'ingressPrivate',
  'retryPolicyInitialInterval',
  'retryPolicyMaxInterval',
  'retryPolicyMaxAttempts',
  'retryPolicyExponentiationFactor',
  'retryPolicyOnMaxAttempts',
  'metadata',
  'documentation',
] as const;
const ENDPOINT_FIELDS = new Set([
  'protocolMode',
  'minProtocolVersion',
  'maxProtocolVersion',
  'lambdaCompression',
  'services',
]);
const SERVICE_FIELDS = new Set(['name', 'ty', 'handlers', ...OPTION_FIELDS]);
const HANDLER_FIELDS = new Set(['name', 'ty', 'input', 'output', 'workflowCompletionRetention', ...OPTION_FIELDS]);
const INPUT_FIELDS = new Set(['required', 'contentType', 'jsonSchema']);
const OUTPUT_FIELDS = new Set(['contentType', 'setContentTypeIfEmpty', 'jsonSchema']);

function bad(path: string, problem: string): BadDiscoveryResponseError {
  return new BadDiscoveryResponseError(
    `received a bad response from the SDK: ${path === '' ? '' : `${path}: `}${problem}`,
  );
}

type JsonObject = Record<string, unknown>;

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string')
    return `the string ${JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}…` : value)}`;
  return `${typeof value} ${JSON.stringify(value)}`;
}

function join(path: string, key: string): string {
  return path === '' ? key : `${path}.${key}`;
}

/** Unknown fields are refused rather than ignored: a field we do not know may change what the service expects. */
function checkFields(obj: JsonObject, allowed: ReadonlySet<string>, path: string): void {
  for (const key of Object.keys(obj)) {
    if (!allowed.has(key)) {
      throw bad(join(path, key), `unknown field, expected one of ${[...allowed].map((f) => `\`${f}\``).join(', ')}`);
    }
  }
}

function optionalString(obj: JsonObject, key: string, path: string): string | undefined {
  const value = obj[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw bad(join(path, key), `expected a string, got ${describe(value)}`);
  return value;
}

function optionalBoolean(obj: JsonObject, key: string, path: string): boolean | undefined {
  const value = obj[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'boolean') throw bad(join(path, key), `expected a boolean, got ${describe(value)}`);
  return value;
}

function optionalInteger(obj: JsonObject, key: string, path: string, min: number): number | undefined {
  const value = obj[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) {
    throw bad(join(path, key), `expected an integer >= ${min}, got ${describe(value)}`);
  }
  return value;
}

/** Durations in the manifest are integer milliseconds. */
function optionalMillis(obj: JsonObject, key: string, path: string): number | undefined {
  return optionalInteger(obj, key, path, 0);
}

function requiredInteger(obj: JsonObject, key: string, path: string, min: number): number {
  const value = optionalInteger(obj, key, path, min);
  if (value === undefined) throw bad(join(path, key), 'missing required field');
  return value;
}

function optionalEnum<T>(
  obj: JsonObject,
  key: string,
  path: string,
  values: Readonly<Record<string, T>>,
): T | undefined {
  const value = obj[key];
  if (value === undefined || value === null) return undefined;
  const mapped = typeof value === 'string' ? values[value] : undefined;
  if (mapped === undefined) {
    throw bad(join(path, key), `expected one of ${Object.keys(values).join(', ')}, got ${describe(value)}`);
  }
  return mapped;
}

function optionalStringMap(obj: JsonObject, key: string, path: string): Record<string, string> | undefined {
  const value = obj[key];
  if (value === undefined || value === null) return undefined;
  if (!isObject(value)) throw bad(join(path, key), `expected an object of strings, got ${describe(value)}`);
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(value)) {
    if (typeof v !== 'string') throw bad(`${join(path, key)}.${k}`, `expected a string, got ${describe(v)}`);
    out[k] = v;
  }
  return Object.keys(out).length === 0 ? undefined : out;
}

function requiredArray(obj: JsonObject, key: string, path: string): unknown[] {
  const value = obj[key];
  if (value === undefined || value === null) throw bad(join(path, key), 'missing required field');
  if (!Array.isArray(value)) throw bad(join(path, key), `expected an array, got ${describe(value)}`);
  return value;
}

function requiredName(obj: JsonObject, path: string, pattern: RegExp): string {
  const value = obj['name'];
  if (value === undefined || value === null) throw bad(join(path, 'name'), 'missing required field');
  if (typeof value !== 'string') throw bad(join(path, 'name'), `expected a string, got ${describe(value)}`);
  if (!pattern.test(value))
    throw bad(join(path, 'name'), `${JSON.stringify(value)} doesn't match pattern "${pattern.source}"`);
  return value;
}

function retryPolicy(obj: JsonObject, path: string): RetryPolicyOverrides {
  const policy: RetryPolicyOverrides = {};
  const initial = optionalMillis(obj, 'retryPolicyInitialInterval', path);
  if (initial !== undefined) policy.initialIntervalMs = initial;
  const factor = obj['retryPolicyExponentiationFactor'];
  if (factor !== undefined && factor !== null) {
    if (typeof factor !== 'number' || !Number.isFinite(factor) || factor <= 0) {
      throw bad(join(path, 'retryPolicyExponentiationFactor'), `expected a number > 0, got ${describe(factor)}`);
    }
    policy.exponentiationFactor = factor;
  }
  const maxAttempts = optionalInteger(obj, 'retryPolicyMaxAttempts', path, 1);
  if (maxAttempts !== undefined) policy.maxAttempts = maxAttempts;
  const maxInterval = optionalMillis(obj, 'retryPolicyMaxInterval', path);
  if (maxInterval !== undefined) policy.maxIntervalMs = maxInterval;
  const onMax = optionalEnum(obj, 'retryPolicyOnMaxAttempts', path, ON_MAX_ATTEMPTS);
  if (onMax !== undefined) policy.onMaxAttempts = onMax;
  return policy;
}

/** Options shared by services and handlers; only the ones present are set (exactOptionalPropertyTypes). */
interface CommonOptions {
  documentation?: string;
  metadata?: Record<string, string>;
  retryPolicy: RetryPolicyOverrides;
  idempotencyRetentionMs?: number;
  journalRetentionMs?: number;
  inactivityTimeoutMs?: number;
  abortTimeoutMs?: number;
  enableLazyState?: boolean;
  ingressPrivate?: boolean;
}

function commonOptions(obj: JsonObject, path: string): CommonOptions {
  const out: CommonOptions = { retryPolicy: retryPolicy(obj, path) };
  const documentation = optionalString(obj, 'documentation', path);
  if (documentation !== undefined) out.documentation = documentation;
  const metadata = optionalStringMap(obj, 'metadata', path);
  if (metadata !== undefined) out.metadata = metadata;
  const idempotency = optionalMillis(obj, 'idempotencyRetention', path);
  if (idempotency !== undefined) out.idempotencyRetentionMs = idempotency;
  const journal = optionalMillis(obj, 'journalRetention', path);
  if (journal !== undefined) out.journalRetentionMs = journal;
  const inactivity = optionalMillis(obj, 'inactivityTimeout', path);
  if (inactivity !== undefined) out.inactivityTimeoutMs = inactivity;
  const abort = optionalMillis(obj, 'abortTimeout', path);
  if (abort !== undefined) out.abortTimeoutMs = abort;
  const lazy = optionalBoolean(obj, 'enableLazyState', path);
  if (lazy !== undefined) out.enableLazyState = lazy;
  const ingressPrivate = optionalBoolean(obj, 'ingressPrivate', path);
  if (ingressPrivate !== undefined) out.ingressPrivate = ingressPrivate;
  return out;
}

/**
 * An absent `input` accepts any body with any content type (`*\/*`, restate's default input rules); `{}` accepts
 * only an empty body.
 */
function inputRules(value: unknown, path: string): InputRules {
  if (value === undefined || value === null) return { contentType: '*/*', required: false };
  if (!isObject(value)) throw bad(path, `expected an object, got ${describe(value)}`);
  checkFields(value, INPUT_FIELDS, path);
  const rules: InputRules = { required: optionalBoolean(value, 'required', path) ?? false };
  const contentType = optionalString(value, 'contentType', path);
  if (contentType !== undefined) rules.contentType = contentType;
  if (value['jsonSchema'] !== undefined) rules.jsonSchema = value['jsonSchema'];
  return rules;
}

/** An absent `output` means JSON (restate's default output rules); `{}` means the handler returns no body. */
function outputRules(value: unknown, path: string): OutputRules {
  if (value === undefined || value === null) return { contentType: 'application/json', setContentTypeIfEmpty: false };
  if (!isObject(value)) throw bad(path, `expected an object, got ${describe(value)}`);
  checkFields(value, OUTPUT_FIELDS, path);
  const rules: OutputRules = { setContentTypeIfEmpty: optionalBoolean(value, 'setContentTypeIfEmpty', path) ?? false };
  const contentType = optionalString(value, 'contentType', path);
  if (contentType !== undefined) rules.contentType = contentType;
  if (value['jsonSchema'] !== undefined) rules.jsonSchema = value['jsonSchema'];
  return rules;
}

/** Which handler types each service type allows, and the type of a handler that declares none. */
const HANDLER_RULES: Readonly<
  Record<ServiceType, { allowed: readonly HandlerType[]; implied: HandlerType | undefined }>
> = {
  Service: { allowed: [], implied: undefined },
  VirtualObject: { allowed: ['Exclusive', 'Shared'], implied: 'Exclusive' },
  Workflow: { allowed: ['Workflow', 'Shared'], implied: 'Shared' },
};

function parseHandler(
  value: unknown,
  path: string,
  service: { name: string; ty: ServiceType; private: boolean },
): HandlerSchema {
  if (!isObject(value)) throw bad(path, `expected an object, got ${describe(value)}`);
  checkFields(value, HANDLER_FIELDS, path);
  const name = requiredName(value, path, HANDLER_NAME);
  const declared = optionalEnum(value, 'ty', path, HANDLER_TYPES);
  const rules = HANDLER_RULES[service.ty];
  if (declared !== undefined && !rules.allowed.includes(declared)) {
    throw new InvalidServiceDefinitionError(
      `invalid combination of service type and handler type '(${service.ty}, ${declared})' at ${join(path, 'ty')}: ` +
        (service.ty === 'Service'
          ? 'handlers of a Service have no type'
          : `handlers of a ${service.ty} are ${rules.allowed.join(' or ')}`),
    );
  }
  const options = commonOptions(value, path);
  if (service.private && options.ingressPrivate === false) {
    throw new InvalidServiceDefinitionError(
      `The service ${service.name} is private, but the ${name} is explicitly set as public (${join(path, 'ingressPrivate')}). ` +
        'This is not supported. Please make the service public, and hide the individual handlers',
    );
  }
  const handler: HandlerSchema = {
    name,
    ...options,
    input: inputRules(value['input'], join(path, 'input')),
    output: outputRules(value['output'], join(path, 'output')),
  };
  const ty = declared ?? rules.implied;
  if (ty !== undefined) handler.ty = ty;
  const completion = optionalMillis(value, 'workflowCompletionRetention', path);
  if (completion !== undefined) handler.workflowCompletionRetentionMs = completion;
  return handler;
}

function parseService(value: unknown, path: string): ServiceSchema {
  if (!isObject(value)) throw bad(path, `expected an object, got ${describe(value)}`);
  checkFields(value, SERVICE_FIELDS, path);
  const name = requiredName(value, path, SERVICE_NAME);
  const ty = optionalEnum(value, 'ty', path, SERVICE_TYPES);
  if (ty === undefined) throw bad(join(path, 'ty'), 'missing required field');
  const options = commonOptions(value, path);
  const handlersPath = join(path, 'handlers');
  const seen = new Set<string>();
  const handlers = requiredArray(value, 'handlers', path).map((h, i) => {
    const handler = parseHandler(h, `${handlersPath}[${i}]`, { name, ty, private: options.ingressPrivate === true });
    if (seen.has(handler.name)) {
      throw new InvalidServiceDefinitionError(
        `service '${name}' declares the handler '${handler.name}' twice (${handlersPath}[${i}])`,
      );
    }
    seen.add(handler.name);
    return handler;
  });
  const service: ServiceSchema = { name, ty, handlers, ...options };
  // The manifest carries the workflow completion retention on the workflow's run handler; the admin API shows it
  // on the service.
  const completion = handlers.find((h) => h.ty === 'Workflow' && h.workflowCompletionRetentionMs !== undefined);
  if (ty === 'Workflow' && completion?.workflowCompletionRetentionMs !== undefined) {
    service.workflowCompletionRetentionMs = completion.workflowCompletionRetentionMs;
  }
  return service;
}

/**
 * Validates a discovery response body. Throws META0013 (bad structure, naming the field), META0012 (no common
 * protocol version) or META0015 (BIDI_STREAM announced over HTTP/1.1).
 */
export function parseManifest(manifest: unknown, context: ManifestContext): ParsedManifest {
  if (!isObject(manifest)) throw bad('', `expected a JSON object, got ${describe(manifest)}`);
  checkFields(manifest, ENDPOINT_FIELDS, '');
  const protocolType = optionalEnum(manifest, 'protocolMode', '', PROTOCOL_MODES);
  if (protocolType === undefined) throw bad('', 'missing protocol mode (protocolMode)');
  const minProtocolVersion = requiredInteger(manifest, 'minProtocolVersion', '', 1);
  const maxProtocolVersion = requiredInteger(manifest, 'maxProtocolVersion', '', 1);
  if (minProtocolVersion > maxProtocolVersion) {
    throw bad('minProtocolVersion', `${minProtocolVersion} is greater than maxProtocolVersion ${maxProtocolVersion}`);
  }
  if (manifest['lambdaCompression'] !== undefined && manifest['lambdaCompression'] !== null) {
    optionalEnum(manifest, 'lambdaCompression', '', { zstd: 'zstd' });
  }
  const seen = new Set<string>();
  const services = requiredArray(manifest, 'services', '').map((s, i) => {
    const service = parseService(s, `services[${i}]`);
    if (seen.has(service.name)) {
      throw new InvalidServiceDefinitionError(
        `the endpoint declares the service '${service.name}' twice (services[${i}])`,
      );
    }
    seen.add(service.name);
    return service;
  });

  if (maxProtocolVersion < MIN_PROTOCOL_VERSION || minProtocolVersion > MAX_PROTOCOL_VERSION) {
    throw new IncompatibleProtocolVersionsError(
      `unsupported service protocol versions: [${minProtocolVersion}, ${maxProtocolVersion}]. Supported versions by ` +
        `this runtime are [${MIN_PROTOCOL_VERSION}, ${MAX_PROTOCOL_VERSION}]. Please upgrade the SDK and try registering again.`,
    );
  }
  if (protocolType === 'BidiStream' && context.transport === 'Lambda') {
    throw new BidiStreamOverRequestResponseError(
      'the function announces the protocol mode BIDI_STREAM, but Lambda invocations are request/response: a ' +
        "function cannot stream in both directions. Build the handler with the SDK's Lambda entry point, which " +
        "announces REQUEST_RESPONSE (TypeScript SDK: import * as restate from '@restatedev/restate-sdk/lambda'; " +
        'restate.createEndpointHandler({ services: [...] })), deploy it and register the new version.',
    );
  }
  if (protocolType === 'BidiStream' && context.transport === 'HTTP/1.1') {
    throw new BidiStreamOverRequestResponseError(
      'the endpoint announces the protocol mode BIDI_STREAM, but it was discovered over HTTP/1.1 ("use_http_11": true), ' +
        'which cannot stream in both directions. Either serve the endpoint over HTTP/2 and register it without ' +
        '"use_http_11", or make it announce REQUEST_RESPONSE (TypeScript SDK: createEndpointHandler({ bidirectional: false })).',
    );
  }
  return { protocolType, minProtocolVersion, maxProtocolVersion, services };
}
