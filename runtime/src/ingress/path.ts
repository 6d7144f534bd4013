import type { SchemaRegistry } from '../schema/registry.ts';
import type { ActiveService, HandlerSchema } from '../schema/types.ts';
import { IngressError } from './errors.ts';

export type IngressRoute =
  | { kind: 'invoke'; service: ActiveService; handler: HandlerSchema; key: string | undefined; send: boolean }
  | { kind: 'health' };

const BAD_SHAPE = 'bad path, expected either /:service-name/:handler or /:object-name/:object-key/:handler';

/**
 * Restate's ingress path rules: 2 to 7 slashes; `/restate/…` is the Restate API, anything else a service call whose
 * shape depends on the service type (only virtual objects and workflows take a key segment). Keys are URL-decoded,
 * names are not.
 */
export function parseIngressPath(rawPath: string, registry: SchemaRegistry): IngressRoute {
  const slashes = rawPath.split('/').length - 1;
  if (slashes < 2 || slashes > 7) {
    if (rawPath === '/restate/health') return { kind: 'health' };
    throw new IngressError(400, `bad path: ${rawPath}`);
  }
  const segments = rawPath.slice(1).split('/');
  if (segments[0] === 'restate') {
    if (segments.length === 2 && segments[1] === 'health') return { kind: 'health' };
    if ((segments[1] === 'call' || segments[1] === 'send') && segments.length >= 4) {
      return serviceRoute(segments.slice(2), segments[1] === 'send', registry, false);
    }
    throw new IngressError(404, 'not found');
  }
  return serviceRoute(segments, undefined, registry, true);
}

function serviceRoute(
  segments: string[],
  send: boolean | undefined,
  registry: SchemaRegistry,
  legacy: boolean,
): IngressRoute {
  const name = segments[0] ?? '';
  const service = registry.service(name);
  if (service === undefined) {
    throw new IngressError(404, `service '${name}' not found, make sure to register the service before calling it.`);
  }
  const keyed = service.schema.ty !== 'Service';
  let rest = segments.slice(1);
  let isSend = send ?? false;
  if (legacy && rest.length === (keyed ? 3 : 2) && rest[rest.length - 1] === 'send') {
    isSend = true;
    rest = rest.slice(0, -1);
  }
  if (rest.length !== (keyed ? 2 : 1)) throw new IngressError(400, BAD_SHAPE);
  let key: string | undefined;
  if (keyed) {
    try {
      key = decodeURIComponent(rest[0]!);
    } catch {
      throw new IngressError(400, `bad path: cannot URL-decode the key '${rest[0]!}'`);
    }
  }
  const handlerName = rest[rest.length - 1]!;
  const handler = service.schema.handlers.find((h) => h.name === handlerName);
  if (handler === undefined) {
    throw new IngressError(
      404,
      `the service '${name}' exists, but the handler '${handlerName}' was not found, check that the handler exists in the latest registered service version.`,
    );
  }
  return { kind: 'invoke', service, handler, key, send: isSend };
}
