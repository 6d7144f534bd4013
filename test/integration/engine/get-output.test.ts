import http2 from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvocationId } from '../../../runtime/src/ids/invocation-id.ts';
import { FrameDecoder, encodeFrame, type Frame } from '../../../runtime/src/protocol/framing.ts';
import {
  MessageType,
  decodeMessage,
  encodeMessage,
  encodeOutputCommand,
  type NotificationMessage,
} from '../../../runtime/src/protocol/messages.ts';
import { LOOPBACK } from '../../support/ports.ts';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { registerDeployment } from '../../support/registration.ts';
import { call, startTestRuntime, type TestRuntime } from '../support/runtime.ts';

/**
 * GetInvocationOutput is not reachable from the TypeScript SDK's API, so a hand-written deployment drives it: its
 * `Probe/run` asks for the output of the invocation id given as input, suspends, and on the replay returns what the
 * runtime answered — the result of a completed invocation, void for one still running, 404 for an unknown one. Its
 * `Probe/block` never finishes on its own (it suspends on a completion that never comes).
 */

function manifest(): Record<string, unknown> {
  const handler = (name: string) => ({
    name,
    input: { required: false, contentType: 'application/json' },
    output: { setContentTypeIfEmpty: false, contentType: 'application/json' },
  });
  return {
    protocolMode: 'BIDI_STREAM',
    minProtocolVersion: 5,
    maxProtocolVersion: 7,
    services: [{ name: 'Probe', ty: 'SERVICE', handlers: [handler('run'), handler('block'), handler('echo')] }],
  };
}

function describeAnswer(n: NotificationMessage): string {
  switch (n.result.kind) {
    case 'void':
      return 'void';
    case 'value':
      return `value ${Buffer.from(n.result.value).toString()}`;
    case 'failure':
      return `failure ${n.result.failure.code} ${n.result.failure.message}`;
    case 'invocationId':
    case 'stateKeys':
      return n.result.kind;
  }
}

async function startProbeDeployment(): Promise<{ url: string; close(): Promise<void> }> {
  const sessions = new Set<http2.ServerHttp2Session>();
  const server = http2.createServer();
  server.on('session', (s) => {
    sessions.add(s);
    s.on('close', () => sessions.delete(s));
  });
  server.on('stream', (stream, headers) => {
    const path = String(headers[':path']);
    if (path.endsWith('/discover')) {
      stream.respond({ ':status': 200, 'content-type': 'application/vnd.restate.endpointmanifest.v4+json' });
      stream.end(JSON.stringify(manifest()));
      return;
    }
    stream.respond({ ':status': 200, 'content-type': String(headers['content-type']) });
    const decoder = new FrameDecoder();
    const frames: Frame[] = [];
    let known = -1;
    let done = false;
    const write = (type: number, payload: Uint8Array): void => void stream.write(encodeFrame(type, payload));
    const finish = (type: number, payload: Uint8Array): void => {
      done = true;
      write(type, payload);
      stream.end();
    };
    stream.on('data', (chunk: Buffer) => {
      if (done) return;
      for (const f of decoder.push(chunk)) {
        if (f.type === MessageType.Start) {
          const m = decodeMessage(f.type, f.payload);
          if (m.type === MessageType.Start) known = m.message.knownEntries;
          continue;
        }
        frames.push(f);
      }
      if (known < 0 || frames.length < known) return;
      const input = frames[0]!;
      const inputMsg = decodeMessage(input.type, input.payload);
      const arg =
        inputMsg.type === MessageType.InputCommand
          ? (JSON.parse(Buffer.from(inputMsg.message.value).toString()) as string)
          : '';
      const suspendOn = (completion: number): void =>
        finish(
          MessageType.Suspension,
          encodeMessage(MessageType.Suspension, {
            waitingCompletions: [completion],
            waitingSignals: [],
            waitingNamedSignals: [],
          }),
        );
      if (path.endsWith('/block')) {
        suspendOn(99);
        return;
      }
      if (path.endsWith('/echo')) {
        write(
          MessageType.OutputCommand,
          encodeOutputCommand({
            result: { kind: 'value', value: Buffer.from(JSON.stringify(`echo ${arg}`)) },
            name: '',
          }),
        );
        finish(MessageType.End, new Uint8Array());
        return;
      }
      // run: journal = [Input] on the first attempt, [Input, GetInvocationOutput, its completion] on the replay.
      if (known === 1) {
        write(
          MessageType.GetInvocationOutputCommand,
          encodeMessage(MessageType.GetInvocationOutputCommand, {
            target: { kind: 'invocationId', invocationId: arg },
            resultCompletionId: 1,
            name: '',
          }),
        );
        suspendOn(1);
        return;
      }
      const answer = frames.find((x) => x.type === MessageType.GetInvocationOutputCompletionNotification);
      if (answer === undefined) {
        suspendOn(1);
        return;
      }
      const n = decodeMessage(answer.type, answer.payload);
      const text = n.type === MessageType.GetInvocationOutputCompletionNotification ? describeAnswer(n.message) : '?';
      write(
        MessageType.OutputCommand,
        encodeOutputCommand({ result: { kind: 'value', value: Buffer.from(JSON.stringify(text)) }, name: '' }),
      );
      finish(MessageType.End, new Uint8Array());
    });
  });
  await new Promise<void>((resolve) => server.listen(0, LOOPBACK, resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://${LOOPBACK}:${port}/`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sessions) s.destroy();
        server.close(() => resolve());
      }),
  };
}

describe('GetInvocationOutput', () => {
  let db: TestDatabase;
  let runtime: TestRuntime;
  let deployment: { url: string; close(): Promise<void> };

  beforeAll(async () => {
    db = await createTestDatabase();
    runtime = await startTestRuntime(db.url);
    deployment = await startProbeDeployment();
    expect((await registerDeployment(runtime.adminUrl, deployment.url)).status).toBe(201);
  });

  afterAll(async () => {
    await runtime?.stop();
    await deployment?.close();
    await db?.drop();
  });

  it('answers with the result of a completed invocation', async () => {
    const echo = await call(runtime.ingressUrl, '/Probe/echo', 'x');
    expect(echo.json).toBe('echo x');
    const res = await call(runtime.ingressUrl, '/Probe/run', echo.headers.get('x-restate-id'));
    expect(res.json).toBe('value "echo x"');
  });

  it('answers void while the target is still running', async () => {
    const blocked = await call(runtime.ingressUrl, '/Probe/block/send', '');
    const id = (blocked.json as { invocationId: string }).invocationId;
    const res = await call(runtime.ingressUrl, '/Probe/run', id);
    expect(res.json).toBe('void');
  });

  it('answers 404 for an invocation that does not exist', async () => {
    const unknown = InvocationId.forWorkflow('Nobody', 'nothing');
    const res = await call(runtime.ingressUrl, '/Probe/run', unknown);
    expect(res.json).toBe(`failure 404 invocation ${unknown} not found`);
  });
});
