import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOOPBACK } from '../../support/ports.ts';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { startRuntimeProcess, type RuntimeProcess } from '../../support/runtime-process.ts';
import { metricValue } from '../kafka/support.ts';

/**
 * The limits of the HTTP listeners, each refused with a message naming its setting and counted by reason: a request
 * head too large (431), a client too slow with its head or its body (408), too many connections (closed), a body
 * over the ingress limit (413).
 */

/** Writes `chunks` (waiting `pauseMs` after each) and returns what the server answered before closing. */
function raw(port: number, chunks: string[], pauseMs = 0): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, LOOPBACK);
    let answer = '';
    socket.on('data', (d: Buffer) => (answer += d.toString('utf8')));
    socket.on('close', () => resolve(answer));
    socket.on('error', (err) => (answer === '' ? reject(err) : resolve(answer)));
    socket.on('connect', () => {
      void (async () => {
        for (const c of chunks) {
          if (socket.destroyed) return;
          socket.write(c);
          if (pauseMs > 0) await new Promise((r) => setTimeout(r, pauseMs));
        }
      })();
    });
  });
}

function body(answer: string): { code: number; message: string } {
  return JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as { code: number; message: string };
}

describe('HTTP listener limits', () => {
  let db: TestDatabase;
  let runtime: RuntimeProcess;

  beforeAll(async () => {
    db = await createTestDatabase();
    runtime = await startRuntimeProcess({
      databaseUrl: db.url,
      env: {
        RATCHET_HTTP_MAX_HEADER_SIZE: '2 KiB',
        RATCHET_HTTP_HEADERS_TIMEOUT: '600ms',
        RATCHET_HTTP_REQUEST_TIMEOUT: '1500ms',
        RATCHET_HTTP_MAX_CONNECTIONS: '20',
        RATCHET_INGRESS_MAX_BODY_SIZE: '1 KiB',
      },
    });
  }, 120_000);

  afterAll(async () => {
    await runtime?.stop();
    await db?.drop();
  });

  const refused = (reason: string, listener = 'admin'): Promise<number> =>
    metricValue(runtime.metricsUrl, 'ratchet_http_refused_total', { listener, reason });

  it('refuses a request head over the limit with 431 naming the setting', async () => {
    const answer = await raw(runtime.ports.admin, [
      `GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(4096)}\r\n\r\n`,
    ]);
    expect(answer).toMatch(/^HTTP\/1\.1 431 /);
    expect(body(answer).message).toMatch(/larger than 2 KiB \(RATCHET_HTTP_MAX_HEADER_SIZE\)/);
    expect(await refused('header_too_large')).toBe(1);
  });

  it('answers 408 to a client too slow with its headers, and to one too slow with its body', async () => {
    const slowHead = await raw(runtime.ports.admin, ['GET /health HTTP/1.1\r\nHost: x\r\n']);
    expect(slowHead).toMatch(/^HTTP\/1\.1 408 /);
    expect(body(slowHead).message).toMatch(/headers within 600ms \(RATCHET_HTTP_HEADERS_TIMEOUT\)/);
    const slowBody = await raw(
      runtime.ports.ingress,
      ['POST /Nope/run HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n', '{"a":'],
      100,
    );
    expect(slowBody).toMatch(/^HTTP\/1\.1 408 /);
    expect(await refused('timeout')).toBeGreaterThanOrEqual(1);
    expect(await refused('timeout', 'ingress')).toBeGreaterThanOrEqual(1);
  });

  it('refuses a body over the ingress limit with 413 naming the setting', async () => {
    const res = await fetch(`${runtime.ingressUrl}/Nope/run`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify('x'.repeat(4096)),
    });
    expect(res.status).toBe(413);
    expect(((await res.json()) as { message: string }).message).toMatch(
      /reads at most 1 KiB \(RATCHET_INGRESS_MAX_BODY_SIZE\)/,
    );
    expect(await refused('body_too_large', 'ingress')).toBe(1);
  });

  it('closes connections over the per-listener maximum and counts them', async () => {
    const held: net.Socket[] = [];
    try {
      for (let i = 0; i < 20; i++) {
        held.push(
          await new Promise<net.Socket>((resolve, reject) => {
            const s = net.connect(runtime.ports.observability, LOOPBACK, () => resolve(s));
            s.on('error', reject);
          }),
        );
      }
      const extra = await raw(runtime.ports.observability, ['GET /ready HTTP/1.1\r\nHost: x\r\n\r\n']).catch(
        (err: Error) => `error: ${err.message}`,
      );
      expect(extra).not.toMatch(/^HTTP\/1\.1 200/);
      await expect
        .poll(() => refused('too_many_connections', 'observability'), { timeout: 5_000 })
        .toBeGreaterThanOrEqual(1);
    } finally {
      for (const s of held) s.destroy();
    }
    // Once they are gone, the listener serves again.
    await expect
      .poll(async () => (await fetch(`${runtime.observabilityUrl}/ready`)).status, { timeout: 5_000 })
      .toBe(200);
  });
});
