import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { pino, type Logger } from 'pino';
import { expect } from 'vitest';

/**
 * Requests to an admin app without a socket (`app.inject`), the checks every admin test makes on error bodies, and a
 * logger whose lines the test can read (warnings such as RT0021/RT0022 are part of the behaviour).
 */

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  text: string;
  json: () => Record<string, unknown>;
}

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** A JSON body is sent as `application/json` unless `headers` says otherwise; a string body is sent as is. */
export async function adminRequest(
  app: FastifyInstance,
  method: Method,
  url: string,
  body?: unknown,
  headers?: Record<string, string>,
): Promise<Answer> {
  const res = await app.inject({
    method,
    url,
    ...(body === undefined
      ? headers === undefined
        ? {}
        : { headers }
      : {
          payload: typeof body === 'string' ? body : JSON.stringify(body),
          headers: { 'content-type': 'application/json', ...headers },
        }),
  });
  return {
    status: res.statusCode,
    headers: res.headers,
    text: res.body,
    json: () => JSON.parse(res.body) as Record<string, unknown>,
  };
}

/** An error in restate's JSON shape with the given code (`null` = uncoded); returns the message. */
export function expectError(answer: Answer, status: number, code: string | null): string {
  expect(answer.status, answer.text).toBe(status);
  expect(answer.headers['content-type']).toBe('application/json');
  const body = answer.json();
  expect(Object.keys(body)).toEqual(['message', 'restate_code', 'service_code']);
  expect(body['restate_code']).toBe(code);
  expect(body['service_code']).toBe(code);
  const message = String(body['message']);
  if (code !== null) expect(message.startsWith(`[${code}] `), message).toBe(true);
  return message;
}

/** A plain-text refusal (request the server cannot read); returns the text. */
export function expectText(answer: Answer, status: number): string {
  expect(answer.status, answer.text).toBe(status);
  expect(answer.headers['content-type']).toBe('text/plain; charset=utf-8');
  return answer.text;
}

export interface CapturedLogger {
  readonly logger: Logger;
  /** Every JSON log line written so far. */
  lines(): Record<string, unknown>[];
  /** Lines whose message contains `text`. */
  matching(text: string): Record<string, unknown>[];
}

export function captureLogger(level = 'info'): CapturedLogger {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (line.trim() !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
      }
      done();
    },
  });
  const logger = pino({ level }, sink);
  return {
    logger,
    lines: () => [...lines],
    matching: (text) => lines.filter((l) => String(l['msg']).includes(text)),
  };
}
