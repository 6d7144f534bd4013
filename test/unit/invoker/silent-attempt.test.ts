import { describe, expect, it } from 'vitest';
import { Attempt } from '../../../runtime/src/invoker/attempt.ts';
import { encodeFrame } from '../../../runtime/src/protocol/framing.ts';
import { MessageType } from '../../../runtime/src/protocol/message-types.ts';
import type { Exchange, ExchangeHandlers } from '../../../runtime/src/service-client/transport.ts';

const CT = 'application/vnd.restate.invocation.v6';

/** An attempt over a scripted exchange: the test plays the deployment through `handlers`. */
function scripted(onSilent: (ms: number) => void): {
  attempt: Attempt;
  deployment: () => ExchangeHandlers;
  ended: () => boolean;
} {
  let handlers: ExchangeHandlers | undefined;
  let ended = false;
  const exchange: Exchange = { write: () => undefined, end: () => (ended = true), abort: () => undefined };
  const attempt = new Attempt(1, {
    open: (h) => {
      handlers = h;
      return exchange;
    },
    bidi: true,
    contentType: CT,
    inactivityTimeoutMs: 40,
    abortTimeoutMs: 10_000,
    maxMessageSize: 1 << 20,
    onSilent,
  });
  attempt.start([]);
  return { attempt, deployment: () => handlers!, ended: () => ended };
}

describe('an attempt the deployment accepted and never answers', () => {
  it('is reported once when the inactivity timeout passes without a single message', async () => {
    const silent: number[] = [];
    const { attempt, deployment, ended } = scripted((ms) => silent.push(ms));
    // What the SDK does when its handler setup throws: 200 and headers, then nothing.
    deployment().onResponse(200, { 'content-type': CT });
    await new Promise((r) => setTimeout(r, 120));
    expect(silent).toEqual([40]);
    // The request stream was ended (the suspension request); the abort timeout decides from here.
    expect(ended()).toBe(true);
    attempt.abort();
  });

  it('is not reported when the deployment sent a message', async () => {
    const silent: number[] = [];
    const { attempt, deployment, ended } = scripted((ms) => silent.push(ms));
    deployment().onResponse(200, { 'content-type': CT });
    // Any protocol message, e.g. a sleep command's frame type (the attempt does not decode bodies).
    deployment().onData(encodeFrame(MessageType.AwaitingOn, new Uint8Array()));
    await new Promise((r) => setTimeout(r, 120));
    expect(ended()).toBe(true);
    expect(silent).toEqual([]);
    attempt.abort();
  });
});
