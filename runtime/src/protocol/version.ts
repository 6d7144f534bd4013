/**
 * Service-protocol and endpoint-manifest versions, and their HTTP content types.
 */

export const MIN_PROTOCOL_VERSION = 5;
export const MAX_PROTOCOL_VERSION = 7;
export type ProtocolVersion = 5 | 6 | 7;
export const SUPPORTED_PROTOCOL_VERSIONS: readonly ProtocolVersion[] = [5, 6, 7];

const INVOCATION_CONTENT_TYPE_PREFIX = 'application/vnd.restate.invocation.v';

export function isSupportedProtocolVersion(version: number): version is ProtocolVersion {
  return Number.isInteger(version) && version >= MIN_PROTOCOL_VERSION && version <= MAX_PROTOCOL_VERSION;
}

/** `application/vnd.restate.invocation.vN`, sent as both `content-type` and `accept` of an invocation request. */
export function invocationContentType(version: number): string {
  return `${INVOCATION_CONTENT_TYPE_PREFIX}${version}`;
}

/** Media type without parameters, lower-cased (media types are case-insensitive). */
function mediaType(contentType: string): string {
  const semicolon = contentType.indexOf(';');
  return (semicolon === -1 ? contentType : contentType.slice(0, semicolon)).trim().toLowerCase();
}

function parseVersionSuffix(value: string): number | undefined {
  if (!/^[0-9]{1,4}$/.test(value)) return undefined;
  return Number(value);
}

/**
 * The N of `application/vnd.restate.invocation.vN` (any N, supported or not, so callers can report it), or
 * undefined when the value is not an invocation content type.
 */
export function parseInvocationContentType(contentType: string): number | undefined {
  const type = mediaType(contentType);
  if (!type.startsWith(INVOCATION_CONTENT_TYPE_PREFIX)) return undefined;
  return parseVersionSuffix(type.slice(INVOCATION_CONTENT_TYPE_PREFIX.length));
}

/**
 * Highest protocol version both sides speak: the deployment's advertised [min, max] intersected with Ratchet's
 * [5, `localMax`]. `localMax` lets an operator cap the version (restate-server defaults to 6). Undefined when the
 * ranges do not overlap.
 */
export function negotiateProtocolVersion(
  deploymentMin: number,
  deploymentMax: number,
  localMax: number = MAX_PROTOCOL_VERSION,
): ProtocolVersion | undefined {
  const high = Math.min(deploymentMax, localMax, MAX_PROTOCOL_VERSION);
  const low = Math.max(deploymentMin, MIN_PROTOCOL_VERSION);
  if (!Number.isInteger(high) || high < low) return undefined;
  return isSupportedProtocolVersion(high) ? high : undefined;
}

// Discovery

export const MIN_MANIFEST_VERSION = 2;
export const MAX_MANIFEST_VERSION = 4;
export type ManifestVersion = 2 | 3 | 4;
export const SUPPORTED_MANIFEST_VERSIONS: readonly ManifestVersion[] = [2, 3, 4];

const MANIFEST_CONTENT_TYPE_PREFIX = 'application/vnd.restate.endpointmanifest.v';
const MANIFEST_CONTENT_TYPE_SUFFIX = '+json';

export function isSupportedManifestVersion(version: number): version is ManifestVersion {
  return Number.isInteger(version) && version >= MIN_MANIFEST_VERSION && version <= MAX_MANIFEST_VERSION;
}

/** `application/vnd.restate.endpointmanifest.vN+json`. */
export function manifestContentType(version: number): string {
  return `${MANIFEST_CONTENT_TYPE_PREFIX}${version}${MANIFEST_CONTENT_TYPE_SUFFIX}`;
}

/**
 * `Accept` header of a discovery request, exactly as restate-server sends it. v1 is listed although it is not
 * accepted back: the SDK substring-matches v4, v3, v2 in that order, and listing v1 keeps the request byte-identical
 * to restate's.
 */
export const DISCOVERY_ACCEPT_HEADER = [1, 2, 3, 4].map(manifestContentType).join(', ');

/** The N of `application/vnd.restate.endpointmanifest.vN+json`, or undefined for anything else. */
export function parseManifestContentType(contentType: string): number | undefined {
  const type = mediaType(contentType);
  if (!type.startsWith(MANIFEST_CONTENT_TYPE_PREFIX) || !type.endsWith(MANIFEST_CONTENT_TYPE_SUFFIX)) return undefined;
  return parseVersionSuffix(
    type.slice(MANIFEST_CONTENT_TYPE_PREFIX.length, type.length - MANIFEST_CONTENT_TYPE_SUFFIX.length),
  );
}

/**
 * RT0020's message when a service's deployment speaks only protocol versions below the runtime's minimum for new
 * invocations (`RATCHET_INVOKER_MIN_PROTOCOL_VERSION`); undefined when it speaks one at or above it.
 */
export function deprecatedProtocolMessage(
  serviceName: string,
  deployment: { id: string; minProtocolVersion: number; maxProtocolVersion: number },
  minVersion: number,
): string | undefined {
  if (deployment.maxProtocolVersion >= minVersion) return undefined;
  return (
    `the service '${serviceName}' is exposed by deployment ${deployment.id}, which speaks service protocol ` +
    `V${deployment.minProtocolVersion} to V${deployment.maxProtocolVersion}: deprecated, this runtime accepts new ` +
    `invocations from V${minVersion} on (RATCHET_INVOKER_MIN_PROTOCOL_VERSION). Upgrade the service to a current ` +
    'Restate SDK and register it as a new deployment; invocations already running on the old one may finish'
  );
}
