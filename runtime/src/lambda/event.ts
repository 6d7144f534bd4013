/**
 * What goes through Lambda's Invoke API: restate's request shape, an API-Gateway-like event with the HTTP request the
 * SDK's Lambda handler turns back into a discovery or an invocation request, and the SDK's answer in the same shape.
 * Bodies are base64, always on the way in (as restate sends them) and as the SDK says on the way out.
 */

/** Lambda's limit for a synchronous invocation's request and response payloads (6 MB). */
export const MAX_LAMBDA_PAYLOAD_BYTES = 6 * 1024 * 1024;

export interface LambdaRequest {
  path: string;
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body: Buffer;
}

export interface LambdaHttpResponse {
  statusCode: number;
  headers: Record<string, string>;
  body: Buffer;
}

export function encodeRequest(req: LambdaRequest): Buffer {
  return Buffer.from(
    JSON.stringify({
      path: req.path,
      httpMethod: req.method,
      headers: req.headers,
      body: req.body.toString('base64'),
      isBase64Encoded: true,
    }),
  );
}

/** The function answered something that is not the SDK's response shape. */
export class MalformedLambdaResponseError extends Error {
  override readonly name = 'MalformedLambdaResponseError';
}

function snippet(payload: Uint8Array): string {
  const text = Buffer.from(payload).toString('utf8');
  return text.length > 300 ? `${text.slice(0, 300)}… (${payload.length} bytes)` : text;
}

export function decodeResponse(payload: Uint8Array): LambdaHttpResponse {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(payload).toString('utf8'));
  } catch {
    throw new MalformedLambdaResponseError(
      `the function's answer is not JSON: ${snippet(payload)}. Is it a Restate SDK Lambda handler?`,
    );
  }
  const r = parsed as { statusCode?: unknown; headers?: unknown; body?: unknown; isBase64Encoded?: unknown };
  if (typeof parsed !== 'object' || parsed === null || typeof r.statusCode !== 'number') {
    throw new MalformedLambdaResponseError(
      `the function's answer has no numeric statusCode: ${snippet(payload)}. Is it a Restate SDK Lambda handler?`,
    );
  }
  const headers: Record<string, string> = {};
  if (typeof r.headers === 'object' && r.headers !== null) {
    for (const [k, v] of Object.entries(r.headers)) if (typeof v === 'string') headers[k.toLowerCase()] = v;
  }
  const text = typeof r.body === 'string' ? r.body : '';
  return {
    statusCode: r.statusCode,
    headers,
    body: r.isBase64Encoded === true ? Buffer.from(text, 'base64') : Buffer.from(text, 'utf8'),
  };
}
