import type { IncomingMessage, ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { parse as parseYaml } from 'yaml';
import * as discovery from './discovery.ts';
import { KubeError, badRequest, methodNotAllowed, noSuchResource, notFound } from './errors.ts';
import type { Faults, RequestDescription } from './faults.ts';
import { jsonPatch, mergePatch } from './patch.ts';
import { isPublicPath, type Authorizer, type UserInfo } from './rbac.ts';
import type { Registry } from './registry.ts';
import { fieldSelector, labelSelector } from './selectors.ts';
import type { DeleteOptions, PatchType, Store, WriteTarget } from './store.ts';
import { toTable, wantsTable, type IncludeObject } from './tables.ts';
import { apiVersionOf, isObject, type JsonObject, type KubeObject, type ResourceInfo } from './types.ts';
import { asVersion, type WatchHub } from './watch.ts';

/** HTTP routing: parses the path into request info, authenticates, injects faults, authorizes, dispatches. */

export interface ServerContext {
  readonly store: Store;
  readonly registry: Registry;
  readonly watches: WatchHub;
  readonly faults: Faults;
  readonly authorizer: Authorizer | undefined;
  readonly authenticate: (token: string | undefined) => UserInfo | undefined;
  readonly record: (request: RequestDescription) => void;
  readonly serverAddress: () => string;
}

interface ResourceRequest extends RequestDescription {
  readonly watchPath: boolean;
}

const PATCH_TYPES: Record<string, PatchType> = {
  'application/merge-patch+json': 'merge',
  'application/strategic-merge-patch+json': 'strategic',
  'application/json-patch+json': 'json',
  'application/apply-patch+yaml': 'apply',
};

class PageNotFound extends Error {}

function describe(method: string, url: URL): ResourceRequest | undefined {
  const segments = url.pathname
    .split('/')
    .filter((s) => s !== '')
    .map(decodeURIComponent);
  let group: string;
  let version: string;
  let rest: string[];
  if (segments[0] === 'api' && segments.length >= 3) {
    [group, version, rest] = ['', segments[1] ?? '', segments.slice(2)];
  } else if (segments[0] === 'apis' && segments.length >= 4) {
    [group, version, rest] = [segments[1] ?? '', segments[2] ?? '', segments.slice(3)];
  } else {
    return undefined;
  }
  const watchPath = rest[0] === 'watch';
  if (watchPath) rest = rest.slice(1);
  let namespace: string | undefined;
  if (rest[0] === 'namespaces' && rest.length >= 3 && rest[2] !== 'status' && rest[2] !== 'finalize') {
    namespace = rest[1];
    rest = rest.slice(2);
  }
  if (rest.length === 0 || rest.length > 3) throw new PageNotFound();
  const [resource = '', name, subresource = ''] = rest;
  // For the namespaces resource itself, RBAC sees the namespace as the request's namespace.
  if (resource === 'namespaces' && group === '' && name !== undefined) namespace = name;
  const watchParam = url.searchParams.get('watch');
  const watching = watchPath || watchParam === 'true' || watchParam === '1';
  const verb =
    method === 'GET'
      ? name !== undefined && !watching
        ? 'get'
        : watching
          ? 'watch'
          : 'list'
      : method === 'POST'
        ? 'create'
        : method === 'PUT'
          ? 'update'
          : method === 'PATCH'
            ? 'patch'
            : method === 'DELETE'
              ? name === undefined
                ? 'deletecollection'
                : 'delete'
              : method.toLowerCase();
  return { method, path: url.pathname, verb, group, version, resource, subresource, namespace, name, watchPath };
}

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function contentType(request: IncomingMessage): string {
  return (request.headers['content-type'] ?? 'application/json').split(';')[0]?.trim() ?? 'application/json';
}

function parseBody(text: string, type: string): unknown {
  if (text.trim() === '') return undefined;
  if (type.includes('protobuf') || type.includes('cbor')) {
    throw new KubeError(
      'UnsupportedMediaType',
      `the body of the request was in an unknown format - accepted media types include: application/json, application/yaml`,
    );
  }
  try {
    return type.includes('yaml') ? parseYaml(text) : JSON.parse(text);
  } catch (error) {
    throw badRequest(`the body of the request could not be decoded: ${(error as Error).message}`);
  }
}

function send(response: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  response.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  response.end(text);
}

function sendText(response: ServerResponse, status: number, text: string): void {
  response.writeHead(status, {
    'Content-Type': 'text/plain; charset=utf-8',
    'Content-Length': Buffer.byteLength(text),
  });
  response.end(text);
}

export function createHandler(ctx: ServerContext): (request: IncomingMessage, response: ServerResponse) => void {
  return (request, response) => {
    void handle(ctx, request, response).catch((error: unknown) => {
      const failure =
        error instanceof KubeError ? error : new KubeError('InternalError', `fake-kube: ${String(error)}`);
      if (response.headersSent) response.destroy();
      else send(response, failure.code, failure.toStatus());
    });
  };
}

async function handle(ctx: ServerContext, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const method = request.method ?? 'GET';
  const url = new URL(request.url ?? '/', 'http://fake-kube');
  let description: ResourceRequest | undefined;
  try {
    description = describe(method, url);
  } catch (error) {
    if (error instanceof PageNotFound) return sendText(response, 404, '404 page not found\n');
    throw error;
  }
  const summary: RequestDescription = description ?? {
    method,
    path: url.pathname,
    verb: '',
    group: '',
    version: '',
    resource: '',
    subresource: '',
    namespace: undefined,
    name: undefined,
  };
  ctx.record(summary);
  const delay = ctx.faults.delayFor(summary);
  if (delay > 0) await sleep(delay);

  const authorization = request.headers.authorization;
  const token =
    authorization?.startsWith('Bearer ') === true ? authorization.slice('Bearer '.length).trim() : undefined;
  const user = ctx.authenticate(token);
  if (user === undefined) throw new KubeError('Unauthorized', 'Unauthorized');

  const injected = ctx.faults.take(summary);
  if (injected !== undefined) throw injected;

  if (description === undefined) return serveNonResource(ctx, url, response);
  const info = ctx.registry.find(description.group, description.version, description.resource);
  if (info === undefined) {
    if (ctx.registry.servesGroupVersion(description.group, description.version)) throw noSuchResource();
    return sendText(response, 404, '404 page not found\n');
  }
  if (description.namespace !== undefined && !info.namespaced && description.resource !== 'namespaces')
    throw noSuchResource();
  const ok =
    ['', 'status'].includes(description.subresource) ||
    (description.subresource === 'scale' && info.scale !== undefined);
  if (!ok) throw noSuchResource();
  if (description.subresource !== '' && !['get', 'update', 'patch'].includes(description.verb)) {
    throw methodNotAllowed(`the server does not allow this method on the requested resource`);
  }

  const authorize = (verb: string): void =>
    ctx.authorizer?.check({
      user,
      verb,
      group: info.group,
      resource: info.plural,
      subresource: description.subresource,
      namespace: description.namespace,
      name: description.name,
    });
  authorize(description.verb);
  await dispatch(ctx, info, description, { request, response, url, authorize });
}

function serveNonResource(ctx: ServerContext, url: URL, response: ServerResponse): void {
  const path = url.pathname.replace(/\/+$/, '') || '/';
  const segments = path.split('/').filter((s) => s !== '');
  if (path === '/version') return send(response, 200, discovery.FAKE_VERSION);
  if (path === '/api') return send(response, 200, discovery.coreVersions(ctx.serverAddress()));
  if (path === '/apis') return send(response, 200, discovery.groupList(ctx.registry));
  if (/^\/(healthz|livez|readyz)$/.test(path)) return sendText(response, 200, 'ok');
  if (path === '/openapi/v3') return send(response, 200, discovery.openApiIndex(ctx.registry));
  if (segments[0] === 'openapi' && segments[1] === 'v3') {
    const core = segments[2] === 'api';
    const doc = discovery.openApiDocument(ctx.registry, core ? '' : (segments[3] ?? ''), segments[core ? 3 : 4] ?? '');
    if (doc !== undefined) return send(response, 200, doc);
  }
  if (segments[0] === 'api' && segments.length === 2) {
    const list = discovery.resourceList(ctx.registry, '', segments[1] ?? '');
    if (list !== undefined) return send(response, 200, list);
  }
  if (segments[0] === 'apis' && segments.length === 2) {
    const group = discovery.group(ctx.registry, segments[1] ?? '');
    if (group !== undefined) return send(response, 200, group);
  }
  if (segments[0] === 'apis' && segments.length === 3) {
    const list = discovery.resourceList(ctx.registry, segments[1] ?? '', segments[2] ?? '');
    if (list !== undefined) return send(response, 200, list);
  }
  if (!isPublicPath(path)) throw new KubeError('NotFound', 'the server could not find the requested resource');
  sendText(response, 404, '404 page not found\n');
}

interface Exchange {
  readonly request: IncomingMessage;
  readonly response: ServerResponse;
  readonly url: URL;
  readonly authorize: (verb: string) => void;
}

async function dispatch(ctx: ServerContext, info: ResourceInfo, d: ResourceRequest, x: Exchange): Promise<void> {
  const { store } = ctx;
  const q = x.url.searchParams;
  const out = (object: KubeObject): KubeObject => asVersion(object, info, d.version);
  const apiVersion = apiVersionOf(info.group, d.version);
  const table = wantsTable(x.request.headers.accept)
    ? { includeObject: (q.get('includeObject') ?? 'Metadata') as IncludeObject }
    : undefined;
  const name = d.name ?? '';
  const dryRun = q.getAll('dryRun').includes('All');
  const userAgent = x.request.headers['user-agent'] ?? 'unknown';
  const manager = q.get('fieldManager') ?? userAgent.split('/')[0] ?? 'unknown';
  const target: WriteTarget = d.subresource === 'status' ? 'status' : 'main';
  const selector = (): ((o: KubeObject) => boolean) => {
    const labels = labelSelector(q.get('labelSelector'));
    const fields = fieldSelector(q.get('fieldSelector'));
    return (o) => labels(o) && fields(o);
  };

  switch (d.verb) {
    case 'get': {
      const object = store.get(info, d.namespace, name);
      if (object === undefined) throw notFound(info, name);
      if (d.subresource === 'scale') return send(x.response, 200, store.scaleOf(info, object));
      const rv = object.metadata.resourceVersion ?? '';
      return send(
        x.response,
        200,
        table ? toTable(info, d.version, [out(object)], { ...table, resourceVersion: rv }) : out(object),
      );
    }
    case 'list': {
      const matches = selector();
      const items = store.list(info, d.namespace).filter(matches).map(out);
      const resourceVersion = String(store.resourceVersion);
      if (table !== undefined)
        return send(x.response, 200, toTable(info, d.version, items, { ...table, resourceVersion }));
      return send(x.response, 200, { kind: `${info.kind}List`, apiVersion, metadata: { resourceVersion }, items });
    }
    case 'watch': {
      const rv = q.get('resourceVersion') ?? undefined;
      if (rv !== undefined && rv !== '' && !/^\d+$/.test(rv)) throw badRequest(`invalid resource version: ${rv}`);
      const base = selector();
      const nameFilter = (o: KubeObject): boolean => d.name === undefined || o.metadata.name === d.name;
      const timeout = q.get('timeoutSeconds');
      return ctx.watches.serve(
        {
          resource: info,
          version: d.version,
          namespace: d.namespace,
          selector: (o) => nameFilter(o) && base(o),
          resourceVersion: rv,
          allowBookmarks: q.get('allowWatchBookmarks') === 'true',
          sendInitialEvents: q.get('sendInitialEvents') === 'true',
          timeoutSeconds: timeout === null ? undefined : Number(timeout),
          table,
        },
        x.response,
      );
    }
    case 'create': {
      const body = parseBody(await readBody(x.request), contentType(x.request));
      return send(x.response, 201, out(store.create(info, d.namespace, body, { manager, dryRun })));
    }
    case 'update': {
      const body = parseBody(await readBody(x.request), contentType(x.request));
      if (d.subresource === 'scale')
        return send(x.response, 200, store.writeScale(info, d.namespace, name, body, { manager, dryRun }));
      return send(x.response, 200, out(store.update(info, d.namespace, name, body, { manager, target, dryRun })));
    }
    case 'patch': {
      const type = PATCH_TYPES[contentType(x.request)];
      if (type === undefined) {
        throw new KubeError(
          'UnsupportedMediaType',
          `the body of the request was in an unknown format - accepted media types include: ${Object.keys(PATCH_TYPES).join(', ')}`,
        );
      }
      const text = await readBody(x.request);
      const body = parseBody(text, type === 'apply' ? 'application/yaml' : 'application/json');
      if (d.subresource === 'scale') {
        const current = store.get(info, d.namespace, name);
        if (current === undefined) throw notFound(info, name);
        const scale = store.scaleOf(info, current);
        const patched = type === 'json' ? jsonPatch(scale, body) : mergePatch(scale, body);
        return send(x.response, 200, store.writeScale(info, d.namespace, name, patched, { manager, dryRun }));
      }
      const exists = store.get(info, d.namespace, name) !== undefined;
      // An apply that creates the object also needs the create permission, as upstream.
      if (type === 'apply' && !exists) x.authorize('create');
      const force = q.get('force') === 'true';
      const applyManager = q.get('fieldManager') ?? '';
      const result = store.patch(info, d.namespace, name, type, body, {
        manager: type === 'apply' ? applyManager : manager,
        target,
        dryRun,
        force,
      });
      return send(x.response, type === 'apply' && !exists ? 201 : 200, out(result));
    }
    case 'delete':
    case 'deletecollection': {
      const body = parseBody(await readBody(x.request), 'application/json');
      const options = deleteOptions(q, isObject(body) ? body : {});
      if (d.verb === 'delete') return send(x.response, 200, out(store.delete(info, d.namespace, name, options)));
      const matches = selector();
      const deleted = store
        .list(info, d.namespace)
        .filter(matches)
        .map((o) => out(store.delete(info, o.metadata.namespace, o.metadata.name ?? '', options)));
      return send(x.response, 200, { kind: `${info.kind}List`, apiVersion, metadata: {}, items: deleted });
    }
    default:
      throw methodNotAllowed(`the server does not allow this method on the requested resource`);
  }
}

function deleteOptions(q: URLSearchParams, body: JsonObject): DeleteOptions {
  const policy = q.get('propagationPolicy') ?? body['propagationPolicy'];
  const orphan = q.get('orphanDependents') === 'true' || body['orphanDependents'] === true;
  const preconditions = isObject(body['preconditions']) ? body['preconditions'] : {};
  const dryRun =
    q.getAll('dryRun').includes('All') || (Array.isArray(body['dryRun']) && body['dryRun'].includes('All'));
  const propagationPolicy = orphan ? 'Orphan' : policy;
  return {
    ...(propagationPolicy === 'Orphan' || propagationPolicy === 'Background' || propagationPolicy === 'Foreground'
      ? { propagationPolicy }
      : {}),
    preconditions: {
      ...(typeof preconditions['uid'] === 'string' ? { uid: preconditions['uid'] } : {}),
      ...(typeof preconditions['resourceVersion'] === 'string'
        ? { resourceVersion: preconditions['resourceVersion'] }
        : {}),
    },
    dryRun,
  };
}
