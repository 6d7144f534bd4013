import { STATUS_CODES } from 'node:http';
import type { FastifyReply } from 'fastify';
import type { CompletedInvocation } from '../engine/types.ts';
import type { OutputRules } from '../schema/types.ts';

export type ErrorSource = 'ingress' | 'invocation';

/**
 * Renders an invocation's result as restate does for calls, attach and output: `x-restate-id`, then
 * `idempotency-expires` when the result was served from the retained completion, then the output (with the handler's
 * output content-type) or the failure (status = its code, `x-restate-error-source: invocation`). `output` is the
 * handler's output rules, needed for a success only.
 */
export function sendOutcome(
  reply: FastifyReply,
  id: string,
  output: OutputRules,
  done: CompletedInvocation,
  fromRetained: boolean,
): FastifyReply {
  reply.header('x-restate-id', id);
  if (fromRetained) {
    const expiry = expiresAt(done);
    if (expiry !== undefined) reply.header('idempotency-expires', formatExpiry(expiry));
  }
  if (done.outcome.kind === 'failure') {
    const f = done.outcome.failure;
    const body: Record<string, unknown> = { code: f.code, message: f.message };
    if (f.metadata !== undefined) body.metadata = f.metadata;
    return sendError(reply, f.code, f.message, 'invocation', body);
  }
  const value = Buffer.from(done.outcome.value);
  const ct = output.contentType;
  if (ct !== undefined && (value.length > 0 || output.setContentTypeIfEmpty)) reply.header('content-type', ct);
  return reply.code(200).send(value);
}

export function sendError(
  reply: FastifyReply,
  code: number,
  message: string,
  source: ErrorSource,
  body: Record<string, unknown> = { code, message },
): FastifyReply {
  // Failure codes chosen by handlers may lie outside HTTP's range; the body keeps the real code.
  const status = code >= 400 && code <= 599 ? code : 500;
  setStatus(reply, status);
  return reply
    .header('x-restate-error-source', source)
    .header('content-type', 'application/json')
    .send(jsonBody({ ...body, source }));
}

/**
 * Sets the status; for codes without a reason phrase (470, or a handler's 499) the status line is written as
 * restate's hyper writes it, `HTTP/1.1 470 <none>`, instead of node's `470 unknown`. HTTP/2 has no reason phrase.
 */
export function setStatus(reply: FastifyReply, status: number): FastifyReply {
  reply.code(status);
  if (STATUS_CODES[status] === undefined && reply.request.raw.httpVersionMajor === 1) {
    reply.raw.statusMessage = '<none>';
  }
  return reply;
}

/** A Buffer, not a string: fastify would append `; charset=utf-8` to a string body, which restate does not send. */
export function jsonBody(value: unknown): Buffer {
  return Buffer.from(JSON.stringify(value));
}

/** When the retained result goes away; undefined when it is kept without limit. */
export function expiresAt(done: CompletedInvocation): Date | undefined {
  return done.completionRetentionMs === null
    ? undefined
    : new Date(done.completedAt.getTime() + done.completionRetentionMs);
}

/** `2026-11-21T20:44:19.539000000Z`, as restate renders times in ingress bodies. */
export function formatTimestamp(d: Date): string {
  return d.toISOString().replace(/\.(\d{3})Z$/, '.$1000000Z');
}

/**
 * `2026-11-21T22:44:09.702+00:00`, chrono's `to_rfc3339` as restate renders `idempotency-expires` (milliseconds
 * are left out when they are zero).
 */
export function formatExpiry(d: Date): string {
  return d
    .toISOString()
    .replace(/\.000Z$/, 'Z')
    .replace(/Z$/, '+00:00');
}
