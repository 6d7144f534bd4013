import type { FastifyReply } from 'fastify';
import { toJsonText } from '../schema/render.ts';

/**
 * A JSON answer with exactly `content-type: application/json`, as restate sends it (fastify would add a charset to
 * a string body, so the text goes out as bytes).
 */
export function sendJson(reply: FastifyReply, value: unknown, status = 200): FastifyReply {
  return reply
    .code(status)
    .header('content-type', 'application/json')
    .send(Buffer.from(toJsonText(value), 'utf8'));
}
