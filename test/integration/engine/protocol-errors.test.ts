import http2 from 'node:http2';
import { afterAll, describe, expect, it } from 'vitest';
import { encodeFrame } from '../../../runtime/src/protocol/framing.ts';
import { MessageType, encodeOutputCommand } from '../../../runtime/src/protocol/messages.ts';
import { LOOPBACK } from '../../support/ports.ts';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { registerDeployment } from '../../support/registration.ts';
import { startTestRuntime, type TestRuntime } from '../support/runtime.ts';
import { Db, send } from './helpers.ts';

/**
 * A hand-written deployment speaking the protocol over h2c, to provoke what a real SDK never does: malformed
 * streams (RT0012), a protocol range the runtime no longer offers (RT0013), an SDK that dropped the negotiated
 * version (RT0015), an in-flight invocation whose deployment was overwritten with another protocol range (RT0014), a
 * service on a deprecated protocol version (RT0020),
 * and a service that disappears from its deployment before a delayed invocation starts (RT0011).
 */
type InvokeBehaviour = 'end-without-output' | 'garbage' | 'output' | 'unsupported-version';

interface FakeDeployment {
  url: string;
  manifest: Record<string, unknown>;
  behaviour: InvokeBehaviour;
  invocations: number;
  close(): Promise<void>;
}

function handler(name: string): Record<string, unknown> {
  return {
    name,
    input: { required: false, contentType: 'application/json' },
    output: { setContentTypeIfEmpty: false, contentType: 'application/json' },
  };
}

function manifest(services: string[], min = 5, max = 7): Record<string, unknown> {
  return {
    protocolMode: 'BIDI_STREAM',
    minProtocolVersion: min,
    maxProtocolVersion: max,
    services: services.map((name) => ({ name, ty: 'SERVICE', handlers: [handler('run')] })),
  };
}

async function startFakeDeployment(initial: Record<string, unknown>): Promise<FakeDeployment> {
  const sessions = new Set<http2.ServerHttp2Session>();
  const server = http2.createServer();
  const fake: FakeDeployment = {
    url: '',
    manifest: initial,
    behaviour: 'output',
    invocations: 0,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sessions) s.destroy();
        server.close(() => resolve());
      }),
  };
  server.on('session', (s) => {
    sessions.add(s);
    s.on('close', () => sessions.delete(s));
  });
  server.on('stream', (stream, headers) => {
    const path = String(headers[':path']);
    if (path.endsWith('/discover')) {
      stream.respond({ ':status': 200, 'content-type': 'application/vnd.restate.endpointmanifest.v4+json' });
      stream.end(JSON.stringify(fake.manifest));
      return;
    }
    fake.invocations += 1;
    const contentType = String(headers['content-type']);
    if (fake.behaviour === 'unsupported-version') {
      // What an SDK answers for an invocation content type whose protocol version it does not speak.
      stream.respond({ ':status': 415, 'content-type': 'text/plain' });
      stream.end(`Unsupported protocol version '${contentType}'`);
      return;
    }
    stream.respond({ ':status': 200, 'content-type': contentType });
    stream.on('data', () => undefined);
    switch (fake.behaviour) {
      case 'end-without-output':
        stream.end(encodeFrame(MessageType.End, new Uint8Array()));
        return;
      case 'garbage':
        // A header announcing a message type no protocol version defines.
        stream.end(encodeFrame(0x7777, new Uint8Array([1, 2, 3])));
        return;
      case 'output':
        stream.write(
          encodeFrame(
            MessageType.OutputCommand,
            encodeOutputCommand({ result: { kind: 'value', value: Buffer.from('"done"') }, name: '' }),
          ),
        );
        stream.end(encodeFrame(MessageType.End, new Uint8Array()));
        return;
    }
  });
  await new Promise<void>((resolve) => server.listen(0, LOOPBACK, resolve));
  const { port } = server.address() as { port: number };
  fake.url = `http://${LOOPBACK}:${port}/`;
  return fake;
}

describe('protocol-level failures', () => {
  // Each scenario runs its own runtime on its own database: a second runtime on a shared database would own no
  // partition (the first holds their leases) and could not accept invocations.
  let reader!: Db;
  const cleanups: (() => Promise<void>)[] = [];

  afterAll(async () => {
    for (const c of cleanups.reverse()) await c();
  });

  async function setup(services: string[], env: Record<string, string> = {}, min = 5, max = 7) {
    const db: TestDatabase = await createTestDatabase();
    cleanups.push(() => db.drop());
    reader = await Db.connect(db.url);
    const r = reader;
    cleanups.push(() => r.close());
    const fake = await startFakeDeployment(manifest(services, min, max));
    cleanups.push(() => fake.close());
    const runtime: TestRuntime = await startTestRuntime(db.url, {
      RATCHET_RETRY_INITIAL_INTERVAL: '50ms',
      RATCHET_RETRY_MAX_INTERVAL: '100ms',
      ...env,
    });
    cleanups.push(() => runtime.stop());
    expect((await registerDeployment(runtime.adminUrl, fake.url)).status).toBe(201);
    return { fake, runtime };
  }

  it('records RT0012 for a stream that violates the protocol, and recovers when the deployment behaves', async () => {
    const { fake, runtime } = await setup(['Violator']);
    fake.behaviour = 'end-without-output';
    const id = await send(runtime.ingressUrl, '/Violator/run', null);
    await expect.poll(async () => (await reader.row(id))?.last_failure_code, { timeout: 10_000 }).toBe('RT0012');
    expect((await reader.row(id))?.last_failure).toMatch(/End without an Output/);

    fake.behaviour = 'garbage';
    await expect
      .poll(async () => (await reader.row(id))?.last_failure, { timeout: 10_000 })
      .toMatch(/unknown command type 0x7777/);
    expect((await reader.row(id))?.last_failure_code).toBe('RT0012');

    fake.behaviour = 'output';
    await expect.poll(async () => (await reader.row(id))?.status, { timeout: 10_000 }).toBe('completed');
    expect((await reader.row(id))?.output?.toString()).toBe('"done"');
  });

  it('records RT0013 when the deployment supports no protocol version the runtime offers', async () => {
    // Registration accepts any deployment intersecting [5,7]; a runtime configured to offer at most V6 cannot
    // invoke one that speaks only V7.
    const { fake, runtime } = await setup(['OnlyV7'], { RATCHET_INVOKER_MAX_PROTOCOL_VERSION: '6' }, 7, 7);
    const id = await send(runtime.ingressUrl, '/OnlyV7/run', null);
    await expect.poll(async () => (await reader.row(id))?.last_failure_code, { timeout: 10_000 }).toBe('RT0013');
    expect(fake.invocations).toBe(0);
  });

  it('records RT0015 when the SDK refuses the protocol version negotiated at discovery (415)', async () => {
    // Retries never run out (and pause the invocation) however slow the machine is.
    const { fake, runtime } = await setup(['Dropped'], { RATCHET_RETRY_MAX_ATTEMPTS: '1000000' });
    fake.behaviour = 'unsupported-version';
    const id = await send(runtime.ingressUrl, '/Dropped/run', null);
    await expect.poll(async () => (await reader.row(id))?.last_failure_code, { timeout: 10_000 }).toBe('RT0015');
    expect((await reader.row(id))?.last_failure).toMatch(/negotiated at discovery.*Unsupported protocol version/s);
    fake.behaviour = 'output';
    await expect.poll(async () => (await reader.row(id))?.status, { timeout: 10_000 }).toBe('completed');
  });

  it('records RT0014 when an in-flight invocation pinned to V7 finds its deployment overwritten with V5..V6', async () => {
    const { fake, runtime } = await setup(['Pinned'], { RATCHET_RETRY_MAX_ATTEMPTS: '1000000' });
    fake.behaviour = 'unsupported-version';
    const id = await send(runtime.ingressUrl, '/Pinned/run', null);
    // Its first attempt pinned the deployment and V7 (the highest both speak).
    await expect.poll(async () => (await reader.row(id))?.last_failure_code, { timeout: 10_000 }).toBe('RT0015');
    fake.manifest = manifest(['Pinned'], 5, 6);
    expect((await registerDeployment(runtime.adminUrl, fake.url, { force: true })).status).toBe(200);
    // Only now would an attempt succeed: none may reach the deployment with V7 any more.
    fake.behaviour = 'output';
    await expect.poll(async () => (await reader.row(id))?.last_failure_code, { timeout: 10_000 }).toBe('RT0014');
    expect((await reader.row(id))?.last_failure).toMatch(/started with service protocol V7.*V5 to V6/);
    const invocations = fake.invocations;
    await new Promise((r) => setTimeout(r, 300));
    // Nothing is sent to the deployment while the versions disagree.
    expect(fake.invocations).toBe(invocations);
  });

  it('refuses new requests with RT0020 while the service is on a deprecated protocol, until a newer deployment', async () => {
    // The runtime accepts new invocations from V6 on; the deployment speaks only V5.
    const { fake, runtime } = await setup(['Legacy'], { RATCHET_INVOKER_MIN_PROTOCOL_VERSION: '6' }, 5, 5);
    const refused = await fetch(`${runtime.ingressUrl}/Legacy/run`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: 'null',
    });
    expect(refused.status).toBe(400);
    const body = (await refused.json()) as { message: string };
    expect(body.message).toMatch(/^\[RT0020\] the service 'Legacy' is exposed by deployment dp_\w+, which speaks/);
    expect(body.message).toContain('V5 to V5: deprecated');
    expect(fake.invocations).toBe(0);
    // A current deployment of the service (another endpoint) takes the new requests.
    const current = await startFakeDeployment(manifest(['Legacy']));
    cleanups.push(() => current.close());
    expect((await registerDeployment(runtime.adminUrl, current.url)).status).toBe(201);
    const id = await send(runtime.ingressUrl, '/Legacy/run', null);
    await expect.poll(async () => (await reader.row(id))?.status, { timeout: 10_000 }).toBe('completed');
    expect(current.invocations).toBe(1);
    expect(fake.invocations).toBe(0);
  });

  it('records RT0011 when a delayed invocation starts after its service left the registry', async () => {
    const { fake, runtime } = await setup(['Leaving', 'Staying']);
    const res = await fetch(`${runtime.ingressUrl}/Leaving/run/send?delay=1s`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: 'null',
    });
    expect(res.status).toBe(202);
    const { invocationId } = (await res.json()) as { invocationId: string };
    // The deployment is overwritten (force) without the service before the delay is over.
    fake.manifest = manifest(['Staying']);
    expect((await registerDeployment(runtime.adminUrl, fake.url, { force: true })).status).toBe(200);
    await expect
      .poll(async () => (await reader.row(invocationId))?.last_failure_code, { timeout: 10_000 })
      .toBe('RT0011');
    expect(fake.invocations).toBe(0);
  });
});
