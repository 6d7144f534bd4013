/**
 * Every coded error Ratchet can report: the META00xx codes (deployment registration, discovery, metadata storage)
 * and the RT00xx codes (runtime) of the specification's error catalogue (§7.2, §7.3). The numbering has gaps
 * (META0007, META0008, RT0008) because the catalogue has them; a code is never reused for another condition.
 *
 * `description` says when the error happens. How to fix it lives in `docs/<CODE>.md`, one page per code; a unit test
 * keeps the two in step.
 */
export interface ErrorCodeInfo {
  readonly title: string;
  readonly description: string;
}

export const ERROR_CODES = {
  META0003: {
    title: 'Deployment discovery failed',
    description:
      'The service endpoint could not be reached while discovering a deployment: the URI or ARN is wrong, the ' +
      'deployment is down or unreachable, or it needs authentication that was not given in additional_headers.',
  },
  META0004: {
    title: 'Deployment already registered',
    description:
      'A deployment is registered with the URI or ARN of an existing deployment. Deployments are immutable and ' +
      'unique per destination; force: true replaces the existing one but can leave in-flight invocations unrecoverable.',
  },
  META0005: {
    title: 'Metadata cannot be propagated',
    description:
      'Deployment or service metadata could not be stored or propagated; when it happens at startup, the stored ' +
      'metadata may be corrupted.',
  },
  META0006: {
    title: 'Incompatible service revision',
    description:
      'A new deployment exposes a service whose type (service, virtual object, workflow) differs from the type of ' +
      'the registered revision.',
  },
  META0009: {
    title: 'Invalid subscription',
    description:
      'A subscription was refused: bad source or sink URI, Kafka cluster not configured, sink service or handler not ' +
      'registered, or the sink handler does not fit the constraints of its service type.',
  },
  META0010: {
    title: 'Incompatible storage format version',
    description:
      'The storage Ratchet was pointed at records a storage format version that this Ratchet version cannot read.',
  },
  META0011: {
    title: 'Missing storage format version',
    description:
      'The storage Ratchet was pointed at is not empty but records no storage format version (corruption, or data ' +
      'written by something other than a compatible Ratchet).',
  },
  META0012: {
    title: 'Incompatible service protocol versions',
    description:
      'The service protocol versions the endpoint supports do not overlap the versions this Ratchet supports.',
  },
  META0013: {
    title: 'Bad discovery response',
    description: 'The endpoint answered discovery with a response Ratchet cannot understand (incompatible SDK).',
  },
  META0014: {
    title: 'Discovery over HTTP/2 failed',
    description:
      'The discovery request failed, most likely because the endpoint only speaks HTTP/1.1 (typical of local ' +
      'development servers and some proxies) while Ratchet discovers over HTTP/2 by default.',
  },
  META0015: {
    title: 'Bidirectional mode over a request/response transport',
    description:
      'The endpoint announces the bidirectional protocol mode although it is reached over a transport that cannot ' +
      'stream both ways (serverless functions, HTTP/1.1); such endpoints must announce request/response mode.',
  },
  META0016: {
    title: 'In-place deployment update refused',
    description:
      'A deployment update in place was refused because the new metadata differs too much: it must keep the same ' +
      'services with the same types, every previous handler, and exactly the same supported protocol versions.',
  },
  META0017: {
    title: 'Ambiguous forced registration',
    description:
      'A forced registration was refused because two or more deployments share the URI or ARN (possible after an ' +
      'in-place update), so Ratchet cannot tell which one to replace.',
  },
  RT0001: {
    title: 'Response stream aborted',
    description:
      'While only waiting for responses, no message arrived from the deployment within the abort timeout ' +
      '(invoker abort timeout), so Ratchet aborted the stream.',
  },
  RT0002: {
    title: 'Invalid configuration',
    description:
      'The configuration (config file or RATCHET_* environment variables) could not be read or parsed at startup.',
  },
  RT0003: {
    title: 'Message too large',
    description: 'A message sent by the service is larger than the invoker message size limit.',
  },
  RT0004: {
    title: 'Cannot bind',
    description: 'A listener could not bind to its configured address (address in use, not local, or not permitted).',
  },
  RT0005: {
    title: 'Data directory locked',
    description: 'The data directory is locked by another process, usually another Ratchet using the same directory.',
  },
  RT0006: {
    title: 'Invocation error',
    description: 'A generic error happened while invoking the service; the invocation is retried.',
  },
  RT0007: {
    title: 'Retryable handler error',
    description:
      'The handler failed with a retryable error; the invocation is retried and replays from where it left off.',
  },
  RT0009: {
    title: 'Missing storage format version',
    description:
      'The runtime storage holds data but no storage format version (corruption, or data written by something ' +
      'other than a compatible Ratchet).',
  },
  RT0010: {
    title: 'Network error with the deployment',
    description:
      'A network error happened talking to the deployment: it is down, unreachable, blocked, or the endpoint ' +
      'serving the URI is not the deployment that was registered.',
  },
  RT0011: {
    title: 'No deployment for the service',
    description:
      'No deployment was found for the target service; it was removed from the registry before the invocation ran.',
  },
  RT0012: {
    title: 'Protocol violation',
    description: 'The deployment broke the service protocol (incompatible runtime and SDK, or an SDK bug).',
  },
  RT0013: {
    title: 'No common service protocol version',
    description: 'The deployment supports none of the service protocol versions this Ratchet supports.',
  },
  RT0014: {
    title: 'Protocol version changed under an invocation',
    description:
      'An in-flight invocation started with a service protocol version the deployment no longer supports cannot be ' +
      'resumed; upgrading the protocol of a running invocation is not supported.',
  },
  RT0015: {
    title: 'Negotiated protocol version dropped',
    description:
      'No invocation stream could be established because the SDK no longer supports the protocol version negotiated ' +
      'at discovery, and the deployment was not registered again.',
  },
  RT0016: {
    title: 'Journal mismatch',
    description:
      'On replay, the handler produced a different sequence of journal entries than was recorded: the code changed ' +
      'without registering a new deployment, or the handler is not deterministic.',
  },
  RT0017: {
    title: 'Entry precondition failed',
    description:
      'A journal entry failed a precondition; it and the entries after it are discarded and execution is retried from ' +
      'the last recorded entry.',
  },
  RT0018: {
    title: 'Unknown target service or handler',
    description:
      'A call or send made through the context API targets a service or handler that is not registered (possibly ' +
      'only for a moment, while a new registration propagates).',
  },
  RT0019: {
    title: 'Payload too large for the deployment',
    description: 'The deployment, or the platform in front of it, answered 413 Content Too Large.',
  },
  RT0020: {
    title: 'Deprecated service protocol',
    description:
      'The service is exposed by a deployment using a deprecated service protocol version; new requests are refused ' +
      'until a newer deployment is registered.',
  },
  RT0021: {
    title: 'Inactivity timeout ignored',
    description:
      'An inactivity timeout is configured for a deployment in request/response mode (serverless function or ' +
      'HTTP/1.1), where it has no meaning and is ignored.',
  },
  RT0022: {
    title: 'Journal retention clamped',
    description: 'A configured journal retention is longer than the server maximum and was clamped to it.',
  },
  RT0023: {
    title: 'Deployment overloaded',
    description:
      'The deployment, or infrastructure in front of it, answered 429 or 503; the next retry honours its Retry-After header.',
  },
  RT0024: {
    title: 'Invalid flow control use',
    description:
      'A scope or limit key was used while the experimental flow control feature is disabled, or does not follow ' +
      'the required format.',
  },
  RT0025: {
    title: 'Awaited future nesting too deep',
    description:
      'The nesting depth of awaited futures exceeds the invoker max awaited future depth; the invocation is paused.',
  },
} as const satisfies Record<string, ErrorCodeInfo>;

export type ErrorCode = keyof typeof ERROR_CODES;

const codeSet: ReadonlySet<string> = new Set(Object.keys(ERROR_CODES));

export function isErrorCode(value: string): value is ErrorCode {
  return codeSet.has(value);
}
