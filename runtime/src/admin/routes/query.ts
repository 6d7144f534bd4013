import type { IntrospectionQueries } from '../../introspection/query.ts';
import { renderArrow } from '../../introspection/render-arrow.ts';
import { renderJson } from '../../introspection/render-json.ts';
import { RatchetError } from '../../errors/errors.ts';
import { JsonBodyShapeError } from '../errors.ts';
import type { QueryRequest } from '../model/query.ts';
import { readJsonBody } from '../request.ts';
import type { AdminRoutes } from './context.ts';

/**
 * `POST /query` (restate's SQL endpoint): `{"query": "…"}`. `accept: application/json` exactly → `{"rows": […]}`;
 * any other accept (the CLI's `*∕*`, or none) → an Arrow IPC stream. Errors are `{"message": …}` only (no
 * `restate_code`), as restate sends them: 400 for a statement PostgreSQL refuses, 503 when it cannot be reached.
 */
/**
 * `QueryRequest`, checked by hand rather than from the model: restate's SQL endpoint words its refusals with the
 * position of the end of the body (serde names it as where a field was found missing).
 */
function parseQueryRequest(raw: Buffer | undefined, body: unknown): QueryRequest {
  const text = raw?.toString('utf8') ?? '';
  const lines = text.split('\n');
  const end = `line ${lines.length} column ${(lines[lines.length - 1] ?? '').length}`;
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new JsonBodyShapeError(`invalid type: expected struct QueryRequest at ${end}`);
  }
  const sql = (body as { query?: unknown }).query;
  if (sql === undefined) throw new JsonBodyShapeError(`missing field \`query\` at ${end}`);
  if (typeof sql !== 'string') throw new JsonBodyShapeError(`invalid type: expected a string at ${end}`);
  return { query: sql };
}

export function queryRoutes(queries: IntrospectionQueries): AdminRoutes {
  return (scope) => {
    scope.post('/query', async (req, reply) => {
      const raw = req.body as Buffer | undefined;
      const { query: sql } = parseQueryRequest(raw, readJsonBody(req.headers['content-type'], raw));
      const json = req.headers.accept === 'application/json';
      let result;
      try {
        result = await queries.query(sql);
      } catch (err) {
        if (!(err instanceof RatchetError)) throw err;
        if (err.status >= 500) req.log.warn({ err }, `introspection query failed: ${err.message}`);
        return reply
          .code(err.status)
          .header('content-type', 'application/json')
          .send(Buffer.from(JSON.stringify({ message: err.message }), 'utf8'));
      }
      if (json) return reply.code(200).header('content-type', 'application/json').send(renderJson(result));
      return reply
        .code(200)
        .header('content-type', 'application/vnd.apache.arrow.stream')
        .send(Buffer.from(renderArrow(result)));
    });
  };
}
