import type { TObject, TSchema } from '@sinclair/typebox';
import { ADMIN_COMPONENTS, ADMIN_PATH_PARAMETERS } from '../model/components.ts';
import { componentName, toJsonSchema } from '../model/json-schema.ts';
import { OPERATIONS, TAGS, type OperationDoc } from './operations.ts';

/**
 * The admin API's own OpenAPI 3.1 document (`GET /openapi`), built from the routes the app registered: every route
 * appears, described from `operations.ts`, and nothing else does. A route without a description there still appears
 * (with a generic one), so the document never hides what the server serves; a unit test keeps the two complete.
 */

export interface RouteInfo {
  method: string;
  /** Fastify's form: `/deployments/:deployment`. */
  url: string;
}

type Json = Record<string, unknown>;

/** `components.schemas`: the admin API model's named schemas, under restate-server 1.7.12's names. */
function componentSchemas(): Json {
  return Object.fromEntries(ADMIN_COMPONENTS.map((schema) => [componentName(schema), toJsonSchema(schema)]));
}

function componentRef(schema: TSchema): Json {
  return { $ref: `#/components/schemas/${componentName(schema)}` };
}

/** Descriptions of path parameters by the name a route gives them. */
const PATH_PARAMETERS: ReadonlyMap<string, string> = new Map(
  ADMIN_PATH_PARAMETERS.flatMap((params) =>
    Object.entries(params.properties).map(([name, schema]) => [name, schema.description ?? name] as const),
  ),
);

/** An operation's query parameters, from the properties of its query schema. */
function queryParameters(query: TObject): Json[] {
  return Object.entries(query.properties).map(([name, property]) => {
    const { description, ...schema } = toJsonSchema(property);
    return { name, in: 'query', required: query.required?.includes(name) ?? false, description, schema };
  });
}

/** `/deployments/:deployment` → `/deployments/{}` (the key of `OPERATIONS`). */
export function operationKey(route: RouteInfo): string {
  return `${route.method.toUpperCase()} ${route.url.replace(/:[^/]+/g, '{}')}`;
}

function openApiPath(url: string): string {
  return url.replace(/:([^/]+)/g, '{$1}');
}

function pathParameters(url: string): string[] {
  return [...url.matchAll(/:([^/]+)/g)].map((m) => m[1] ?? '');
}

const ERROR_RESPONSES: Record<number, { name: string; description: string; text?: boolean }> = {
  400: { name: 'BadRequest', description: 'Bad request', text: true },
  404: { name: 'NotFound', description: 'Not found' },
  405: { name: 'MethodNotAllowed', description: 'Method not allowed' },
  409: { name: 'Conflict', description: 'Conflict' },
  410: { name: 'Gone', description: 'Gone' },
  415: { name: 'UnsupportedMediaType', description: 'The body is not declared as JSON', text: true },
  422: { name: 'UnprocessableEntity', description: 'The JSON body has the wrong shape', text: true },
  425: { name: 'TooEarly', description: 'Too early' },
  500: { name: 'InternalServerError', description: 'Internal server error' },
  501: { name: 'NotImplemented', description: 'Not implemented' },
  503: { name: 'ServiceUnavailable', description: 'Service unavailable' },
};

function errorResponseComponents(): Json {
  const out: Json = {};
  for (const { name, description, text } of Object.values(ERROR_RESPONSES)) {
    const content: Json = { 'application/json': { schema: { $ref: '#/components/schemas/ErrorDescriptionResponse' } } };
    // Requests the server cannot read at all are answered in plain text (axum's extractor rejections in restate).
    if (text === true) content['text/plain; charset=utf-8'] = { schema: { type: 'string' } };
    out[name] = { description, content };
  }
  return out;
}

function genericOperation(route: RouteInfo): OperationDoc {
  return {
    operationId: `${route.method.toLowerCase()}${route.url.replace(/[^A-Za-z0-9]+/g, '_')}`,
    tag: 'service',
    summary: `${route.method.toUpperCase()} ${openApiPath(route.url)}`,
    description: 'Served by this runtime; not described in detail yet.',
    success: [{ status: '200', description: 'Success' }],
    errors: [400, 404],
  };
}

function operation(route: RouteInfo, doc: OperationDoc): Json {
  const parameters: Json[] = pathParameters(route.url).map((name) => ({
    name,
    in: 'path',
    required: true,
    description: PATH_PARAMETERS.get(name) ?? name,
    schema: { type: 'string' },
  }));
  if (doc.query !== undefined) parameters.push(...queryParameters(doc.query));
  const responses: Json = {};
  for (const s of doc.success) {
    responses[s.status] = {
      description: s.description,
      ...(s.headers === undefined ? {} : { headers: s.headers }),
      ...(s.stringArray === true
        ? { content: { 'application/json': { schema: { type: 'array', items: { type: 'string' } } } } }
        : s.schema === undefined
          ? {}
          : {
              content: {
                'application/json': {
                  schema: s.array === true ? { type: 'array', items: componentRef(s.schema) } : componentRef(s.schema),
                },
              },
            }),
    };
  }
  for (const status of doc.errors) {
    const response = ERROR_RESPONSES[status];
    if (response !== undefined) responses[String(status)] = { $ref: `#/components/responses/${response.name}` };
  }
  return {
    tags: [doc.tag],
    summary: doc.summary,
    description: doc.description,
    operationId: doc.operationId,
    ...(parameters.length === 0 ? {} : { parameters }),
    ...(doc.body === undefined
      ? {}
      : {
          requestBody: {
            required: true,
            content: {
              'application/json': {
                schema:
                  doc.bodyIsArray === true ? { type: 'array', items: componentRef(doc.body) } : componentRef(doc.body),
              },
            },
          },
        }),
    responses,
  };
}

/** The version the admin API description carries (specification section 9), whatever Ratchet's own version. */
export const ADMIN_API_DESCRIPTION_VERSION = '1.7.8';

export function buildAdminOpenApi(routes: readonly RouteInfo[], version: string): unknown {
  const paths: Record<string, Json> = {};
  const seen = new Set<string>();
  for (const route of routes) {
    const method = route.method.toLowerCase();
    if (method === 'head' || method === 'options') continue;
    const key = operationKey(route);
    if (seen.has(key)) continue;
    seen.add(key);
    const path = openApiPath(route.url);
    paths[path] ??= {};
    paths[path][method] = operation(route, OPERATIONS[key] ?? genericOperation(route));
  }
  const used = new Set(
    Object.values(paths).flatMap((item) => Object.values(item).map((op) => (op as { tags: string[] }).tags[0])),
  );
  return {
    openapi: '3.1.0',
    info: {
      title: 'Ratchet Admin API',
      description:
        "Ratchet's admin API: deployments, services, invocations, Kafka clusters and subscriptions. It is " +
        "compatible with restate-server 1.7's admin API (the `restate` CLI works against it); every path is also " +
        'served under `/v2`, `/v3` and `/v4`. Errors are `{"message", "restate_code", "service_code"}`, or plain ' +
        'text when the request cannot be read.',
      license: { name: 'Apache-2.0', url: 'https://www.apache.org/licenses/LICENSE-2.0' },
      version: ADMIN_API_DESCRIPTION_VERSION,
      'x-ratchet-version': version,
    },
    paths,
    components: { schemas: componentSchemas(), responses: errorResponseComponents() },
    tags: TAGS.filter((t) => used.has(t.name)),
  };
}
