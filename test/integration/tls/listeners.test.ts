import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http2 from 'node:http2';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type tls from 'node:tls';
import * as restate from '@restatedev/restate-sdk';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientCa, selfSignedServer, type CertFiles } from '../../support/certificates.ts';
import { LOOPBACK } from '../../support/ports.ts';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { startRuntimeProcess, type RuntimeProcess } from '../../support/runtime-process.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';

/**
 * HTTPS on the ingress (HTTP/2 and HTTP/1.1 by ALPN), the admin API and the observability API with one certificate
 * for all (RATCHET_TLS_*), the SQL listener taking the same one; client certificates required on the admin API
 * (RATCHET_ADMIN_TLS_CLIENT_CA); certificate files replaced in place are served to new connections without a
 * restart. Metrics and probes stay plain HTTP.
 */

interface Answer {
  status: number;
  body: string;
  fingerprint: string;
  alpn: string | false | null;
}

function request(
  port: number,
  path: string,
  options: { ca: Buffer; method?: string; body?: string; cert?: Buffer; key?: Buffer; alpn?: string[] },
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: LOOPBACK,
        port,
        path,
        method: options.method ?? 'GET',
        ca: options.ca,
        ...(options.alpn === undefined ? {} : { ALPNProtocols: options.alpn }),
        ...(options.cert === undefined ? {} : { cert: options.cert, key: options.key }),
        headers: options.body === undefined ? {} : { 'content-type': 'application/json' },
        agent: false,
      },
      (res) => {
        const socket = res.socket as tls.TLSSocket;
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            body: Buffer.concat(chunks).toString('utf8'),
            fingerprint: socket.getPeerCertificate().fingerprint256,
            alpn: socket.alpnProtocol,
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

function h2Call(port: number, path: string, body: string, ca: Buffer): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(`https://${LOOPBACK}:${port}`, { ca });
    session.on('error', reject);
    const stream = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/json' });
    let status = 0;
    const chunks: Buffer[] = [];
    stream.on('response', (h) => (status = Number(h[':status'])));
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => {
      session.close();
      resolve({ status, body: Buffer.concat(chunks).toString('utf8') });
    });
    stream.on('error', reject);
    stream.end(body);
  });
}

const greeter = restate.service({
  name: 'TlsGreeter',
  handlers: { greet: async (_ctx: restate.Context, name: string) => `hello ${name}` },
});

describe('HTTPS listeners', () => {
  let dir: string;
  let server: CertFiles;
  let rotated: CertFiles;
  let client: CertFiles;
  let caPem: Buffer;
  let db: TestDatabase;
  let endpoint: SdkEndpoint;
  let runtime: RuntimeProcess;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ratchet-tls-'));
    server = selfSignedServer(dir, 'server');
    rotated = selfSignedServer(dir, 'rotated');
    const issued = clientCa(dir);
    client = issued.client;
    // The files the runtime reads: replaced in place later.
    copyFileSync(server.certFile, join(dir, 'tls.crt'));
    copyFileSync(server.keyFile, join(dir, 'tls.key'));
    caPem = readFileSync(server.certFile);
    db = await createTestDatabase();
    endpoint = await startEndpoint({ services: [greeter], transport: 'h2' });
    runtime = await startRuntimeProcess({
      databaseUrl: db.url,
      env: {
        RATCHET_TLS_CERT: join(dir, 'tls.crt'),
        RATCHET_TLS_KEY: join(dir, 'tls.key'),
        RATCHET_ADMIN_TLS_CLIENT_CA: issued.ca.certFile,
        RATCHET_LOG_LEVEL: 'info',
      },
      probe: async (ports) => {
        try {
          const answer = await request(ports.admin, '/health', {
            ca: caPem,
            cert: readFileSync(client.certFile),
            key: readFileSync(client.keyFile),
          });
          return answer.status === 200;
        } catch {
          return false;
        }
      },
    });
  }, 120_000);

  afterAll(async () => {
    await runtime?.stop();
    await endpoint?.close();
    await db?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  const clientCert = (): { cert: Buffer; key: Buffer } => ({
    cert: readFileSync(client.certFile),
    key: readFileSync(client.keyFile),
  });

  it('admin API: HTTPS with a client certificate; none, or plain HTTP, is refused', async () => {
    const registered = await request(runtime.ports.admin, '/deployments', {
      ca: caPem,
      method: 'POST',
      body: JSON.stringify({ uri: endpoint.url }),
      ...clientCert(),
    });
    expect(registered.status, registered.body).toBe(201);
    expect(registered.fingerprint).toBe(server.fingerprint);
    await expect(request(runtime.ports.admin, '/health', { ca: caPem })).rejects.toThrow();
    await expect(fetch(`http://${LOOPBACK}:${runtime.ports.admin}/health`)).rejects.toThrow();
  });

  it('ingress: HTTP/2 chosen by ALPN and HTTP/1.1, both over TLS', async () => {
    const h2 = await h2Call(runtime.ports.ingress, '/TlsGreeter/greet', '"h2"', caPem);
    expect(h2).toEqual({ status: 200, body: '"hello h2"' });
    const h1 = await request(runtime.ports.ingress, '/TlsGreeter/greet', {
      ca: caPem,
      method: 'POST',
      body: '"h1"',
      alpn: ['http/1.1'],
    });
    expect(h1.status, h1.body).toBe(200);
    expect(h1.body).toBe('"hello h1"');
    expect(h1.alpn).toBe('http/1.1');
  });

  it('observability API over HTTPS; metrics stay plain HTTP', async () => {
    const ready = await request(runtime.ports.observability, '/ready', { ca: caPem });
    expect(ready.status).toBe(200);
    expect((await fetch(`${runtime.metricsUrl}/metrics`)).status).toBe(200);
  });

  it('SQL introspection takes the shared certificate', async () => {
    const client = new pg.Client({
      host: LOOPBACK,
      port: runtime.ports.introspection,
      user: 'localcluster',
      database: 'localcluster',
      ssl: { ca: caPem, servername: 'localhost' },
    });
    await client.connect();
    try {
      const res = await client.query<{ n: string }>('SELECT count(*)::text AS n FROM sys_deployment');
      expect(res.rows).toEqual([{ n: '1' }]);
    } finally {
      await client.end();
    }
  });

  it('serves certificate files replaced in place to new connections, without a restart', async () => {
    copyFileSync(rotated.keyFile, join(dir, 'tls.key'));
    copyFileSync(rotated.certFile, join(dir, 'tls.crt'));
    const ca = Buffer.concat([caPem, readFileSync(rotated.certFile)]);
    await expect
      .poll(async () => (await request(runtime.ports.observability, '/ready', { ca })).fingerprint, {
        timeout: 15_000,
        interval: 250,
      })
      .toBe(rotated.fingerprint);
    const ingress = await request(runtime.ports.ingress, '/TlsGreeter/greet', { ca, method: 'POST', body: '"r"' });
    expect(ingress.fingerprint).toBe(rotated.fingerprint);
    expect(ingress.status).toBe(200);
    expect(runtime.output()).toContain('TLS certificate reloaded');
  });
});
