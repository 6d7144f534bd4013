import http2 from 'node:http2';
import * as restate from '@restatedev/restate-sdk';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/postgres.ts';
import { startEndpoint } from '../support/sdk-endpoint.ts';
import { RESTATE_SERVER_VERSION, startRestateServer } from '../support/restate-server.ts';
import { startRuntimeProcess } from '../support/runtime-process.ts';

const MANIFEST_V4 = 'application/vnd.restate.endpointmanifest.v4+json';

const greeter = restate.service({
  name: 'Greeter',
  handlers: {
    greet: (_ctx: restate.Context, name: string) => Promise.resolve(`hello ${name}`),
  },
});

interface Manifest {
  protocolMode: string;
  services: { name: string }[];
}

function discoverH2(url: string): Promise<{ status: number; contentType: string; body: Manifest }> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(url);
    session.once('error', reject);
    const request = session.request({ ':method': 'GET', ':path': '/discover', accept: MANIFEST_V4 });
    let status = 0;
    let contentType = '';
    let text = '';
    request.setEncoding('utf8');
    request.once('response', (headers) => {
      status = Number(headers[':status']);
      contentType = String(headers['content-type']);
    });
    request.on('data', (chunk: string) => (text += chunk));
    request.once('error', reject);
    request.once('end', () => {
      session.close();
      try {
        resolve({ status, contentType, body: JSON.parse(text) as Manifest });
      } catch (err) {
        reject(err instanceof Error ? err : new Error(String(err)));
      }
    });
    request.end();
  });
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('test support', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase();
  });

  afterAll(async () => {
    await db.drop();
  });

  it('gives each test file its own PostgreSQL database', async () => {
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      const result = await client.query<{ one: number; db: string }>('select 1 as one, current_database() as db');
      expect(result.rows).toEqual([{ one: 1, db: db.name }]);
    } finally {
      await client.end();
    }
  });

  it('serves an SDK endpoint over h2c in BIDI_STREAM mode', async () => {
    const endpoint = await startEndpoint({ services: [greeter], transport: 'h2' });
    try {
      const { status, contentType, body } = await discoverH2(endpoint.url);
      expect(status).toBe(200);
      expect(contentType).toContain('endpointmanifest.v4');
      expect(body.protocolMode).toBe('BIDI_STREAM');
      expect(body.services.map((s) => s.name)).toEqual(['Greeter']);
    } finally {
      await endpoint.close();
    }
  });

  it('serves an SDK endpoint over HTTP/1.1 in REQUEST_RESPONSE mode', async () => {
    const endpoint = await startEndpoint({ services: [greeter], transport: 'h1' });
    try {
      const response = await fetch(new URL('discover', endpoint.url), { headers: { accept: MANIFEST_V4 } });
      expect(response.status).toBe(200);
      const body = (await response.json()) as Manifest;
      expect(body.protocolMode).toBe('REQUEST_RESPONSE');
      expect(body.services.map((s) => s.name)).toEqual(['Greeter']);
    } finally {
      await endpoint.close();
    }
  });

  it('starts and stops the real restate-server', async () => {
    const server = await startRestateServer({ enableProtocolV7: true });
    try {
      const response = await fetch(`${server.adminUrl}/version`);
      expect(response.status).toBe(200);
      const version = (await response.json()) as { version: string; features?: { protocol_v7?: boolean } };
      expect(version.version).toBe(RESTATE_SERVER_VERSION);
      expect(version.features?.protocol_v7).toBe(true);
    } finally {
      await server.stop();
    }
    expect(await server.exited).toEqual({ code: 0, signal: null });
    expect(isAlive(server.pid)).toBe(false);
  });
});

describe('runtime process harness', () => {
  it('starts a runtime child, SIGKILLs it, restarts it on the same ports and stops it', async () => {
    const first = await startRuntimeProcess({
      databaseUrl: 'postgres://unused',
      entry: 'test/smoke/fixtures/fake-runtime.ts',
      env: { RATCHET_LOG_LEVEL: 'info' },
    });
    const health = (await (await fetch(`${first.adminUrl}/health`)).json()) as { pid: number; database: string };
    expect(health).toEqual({ pid: first.pid, database: 'postgres://unused' });
    expect(first.output()).toContain(`fake runtime ${first.pid} log level info`);

    await first.kill();
    expect(await first.exited).toEqual({ code: null, signal: 'SIGKILL' });
    expect(isAlive(first.pid)).toBe(false);

    const second = await startRuntimeProcess({
      databaseUrl: 'postgres://unused',
      entry: 'test/smoke/fixtures/fake-runtime.ts',
      ports: first.ports,
    });
    try {
      expect(second.adminUrl).toBe(first.adminUrl);
      expect(second.pid).not.toBe(first.pid);
    } finally {
      await second.stop();
    }
    expect(await second.exited).toEqual({ code: 0, signal: null });
  });
});
