import { describe, expect, it } from 'vitest';
import { decodeResponse, encodeRequest, MalformedLambdaResponseError } from '../../../runtime/src/lambda/event.ts';

describe('Lambda request and response events', () => {
  it("encodes restate's request event, the body always base64", () => {
    const event = JSON.parse(
      encodeRequest({
        path: '/invoke/Svc/run',
        method: 'POST',
        headers: { 'content-type': 'application/vnd.restate.invocation.v6' },
        body: Buffer.from([0, 1, 2, 255]),
      }).toString('utf8'),
    ) as Record<string, unknown>;
    expect(event).toEqual({
      path: '/invoke/Svc/run',
      httpMethod: 'POST',
      headers: { 'content-type': 'application/vnd.restate.invocation.v6' },
      body: 'AAEC/w==',
      isBase64Encoded: true,
    });
    expect(Object.keys(event)).toEqual(['path', 'httpMethod', 'headers', 'body', 'isBase64Encoded']);
  });

  it("decodes the SDK's answer: base64 or text bodies, header names lower-cased", () => {
    const b64 = decodeResponse(
      Buffer.from(
        JSON.stringify({ statusCode: 200, headers: { 'Content-Type': 'x' }, body: 'AAEC', isBase64Encoded: true }),
      ),
    );
    expect(b64).toEqual({ statusCode: 200, headers: { 'content-type': 'x' }, body: Buffer.from([0, 1, 2]) });
    const text = decodeResponse(Buffer.from(JSON.stringify({ statusCode: 500, body: 'boom' })));
    expect(text.statusCode).toBe(500);
    expect(text.body.toString('utf8')).toBe('boom');
    expect(text.headers).toEqual({});
  });

  it('refuses answers that are not the SDK response shape, quoting them', () => {
    expect(() => decodeResponse(Buffer.from('not json'))).toThrow(MalformedLambdaResponseError);
    expect(() => decodeResponse(Buffer.from('not json'))).toThrow(/not JSON: not json/);
    expect(() => decodeResponse(Buffer.from('{"hello":1}'))).toThrow(/no numeric statusCode: \{"hello":1\}/);
    expect(() => decodeResponse(Buffer.from('null'))).toThrow(/no numeric statusCode/);
    const long = JSON.stringify({ x: 'y'.repeat(1000) });
    expect(() => decodeResponse(Buffer.from(long))).toThrow(/… \(1008 bytes\)/);
  });
});
