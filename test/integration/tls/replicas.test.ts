import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as restate from '@restatedev/restate-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientCa, selfSignedServer } from '../../support/certificates.ts';
import { LOOPBACK } from '../../support/ports.ts';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { startNode, waitForBalance, waitForService, type ClusterNode } from '../cluster/support.ts';
import { metricValue } from '../kafka/support.ts';

/**
 * Two replicas whose ingress serves HTTPS and requires client certificates: a request for a partition the other node
 * owns is sent on to it over HTTPS, the sender trusting the cluster's certificate and presenting it as its client
 * certificate (the client CA bundle lists it beside the CA of the users' client certificates).
 */

// A virtual object: each key's partition is fixed, so keys owned by the other node are forwarded to it.
const echo = restate.object({
  name: 'TlsEcho',
  handlers: { say: async (_ctx: restate.ObjectContext, s: string) => s },
});

function post(
  port: number,
  key: string,
  body: string,
  tls: { ca: Buffer; cert: Buffer; key: Buffer },
): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: LOOPBACK,
        port,
        path: `/TlsEcho/${key}/say`,
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        ...tls,
        agent: false,
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe('HTTPS between replicas', () => {
  let dir: string;
  let db: TestDatabase;
  let endpoint: SdkEndpoint;
  const nodes: ClusterNode[] = [];
  let clientTls: { ca: Buffer; cert: Buffer; key: Buffer };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ratchet-tls-replicas-'));
    const server = selfSignedServer(dir, 'server');
    const users = clientCa(dir);
    const bundle = join(dir, 'client-cas.pem');
    writeFileSync(bundle, Buffer.concat([readFileSync(users.ca.certFile), readFileSync(server.certFile)]));
    clientTls = {
      ca: readFileSync(server.certFile),
      cert: readFileSync(users.client.certFile),
      key: readFileSync(users.client.keyFile),
    };
    db = await createTestDatabase();
    endpoint = await startEndpoint({ services: [echo], transport: 'h2' });
    const env = {
      RATCHET_PARTITIONS: '8',
      RATCHET_INGRESS_TLS_CERT: server.certFile,
      RATCHET_INGRESS_TLS_KEY: server.keyFile,
      RATCHET_INGRESS_TLS_CLIENT_CA: bundle,
    };
    for (const name of ['node-a', 'node-b']) nodes.push(await startNode(db.url, name, env));
    await waitForBalance(
      nodes[0]!,
      nodes.map((n) => n.name),
      8,
    );
    // Registered through the admin API (plain HTTP here); the ingress health check of registerEndpoint speaks HTTP.
    const registered = await fetch(`${nodes[0]!.process.adminUrl}/deployments`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ uri: endpoint.url }),
    });
    expect(registered.status).toBe(201);
    for (const n of nodes) await waitForService(n, 'TlsEcho');
  }, 120_000);

  afterAll(async () => {
    for (const n of nodes) await n.process.stop();
    await endpoint?.close();
    await db?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('forwards requests for the other node’s partitions over HTTPS with the cluster certificate', async () => {
    const node = nodes[0]!;
    const statuses: number[] = [];
    for (let i = 0; i < 24; i++)
      statuses.push(await post(node.process.ports.ingress, `k${i}`, JSON.stringify(`x${i}`), clientTls));
    expect(statuses.every((s) => s === 200)).toBe(true);
    const forwarded = await metricValue(node.process.metricsUrl, 'ratchet_cluster_forwarded_requests_total', {
      listener: 'ingress',
      result: 'forwarded',
    });
    // 24 keys spread over 8 partitions: about half belong to node-b.
    expect(forwarded).toBeGreaterThan(0);
    expect(
      await metricValue(node.process.metricsUrl, 'ratchet_cluster_forwarded_requests_total', { result: 'failed' }),
    ).toBe(0);
  });

  it('refuses a client without a certificate', async () => {
    await expect(
      post(nodes[0]!.process.ports.ingress, 'k', '"nope"', {
        ...clientTls,
        cert: Buffer.alloc(0),
        key: Buffer.alloc(0),
      }),
    ).rejects.toThrow();
  });
});
