import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as restate from '@restatedev/restate-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OperatorHandle } from '../../operator/src/operator.ts';
import { kubectl, startHarness, type Harness } from '../integration/fake-kube/harness.ts';
import { startKubelet, type Kubelet } from '../support/operator/kubelet.ts';
import { applyAsUser, installOperator, startTestOperator } from '../support/operator/operator-env.ts';
import { createTestDatabase, type TestDatabase } from '../support/postgres.ts';
import { startEndpoint, type SdkEndpoint } from '../support/sdk-endpoint.ts';

/*
 * spec.tls end to end: the fake API server, the real operator, real runtime processes run by the process-backed
 * kubelet from the pod template (the TLS Secret mounted as files, the RATCHET_*TLS* variables the operator sets). The
 * Secret is what cert-manager would write: a certificate for the pods' address issued by a CA, the CA in ca.crt,
 * which also verifies client certificates (spec.tls.clientAuth). The Cluster becomes Ready only if the operator
 * reaches the admin API over HTTPS with a client certificate; a Deployment resource registers through the same
 * target; the ingress serves HTTPS to clients with a certificate and turns away those without.
 */

const NS = 'secure';
const CLUSTER = 'main';

interface Pem {
  cert: string;
  key: string;
}

function openssl(args: string[]): void {
  execFileSync('openssl', args, { stdio: 'ignore' });
}

/** A CA, and leaves it issues (no extended key usage: each serves as server and as client certificate). */
function certificates(dir: string): { ca: Pem; server: Pem; client: Pem } {
  const read = (name: string): Pem => ({
    cert: readFileSync(join(dir, `${name}.crt`), 'utf8'),
    key: readFileSync(join(dir, `${name}.key`), 'utf8'),
  });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl(
    ['req', '-x509', ...ec, '-days', '2', '-subj', '/CN=issuer', '-keyout', join(dir, 'ca.key')].concat([
      '-out',
      join(dir, 'ca.crt'),
    ]),
  );
  const issue = (name: string, san: string): void => {
    writeFileSync(join(dir, `${name}.ext`), `subjectAltName=${san}\n`);
    openssl(
      ['req', ...ec, '-subj', `/CN=${name}`, '-keyout', join(dir, `${name}.key`)].concat([
        '-out',
        join(dir, `${name}.csr`),
      ]),
    );
    openssl(
      [
        'x509',
        '-req',
        '-in',
        join(dir, `${name}.csr`),
        '-CA',
        join(dir, 'ca.crt'),
        '-CAkey',
        join(dir, 'ca.key'),
      ].concat([
        '-CAcreateserial',
        '-days',
        '2',
        '-extfile',
        join(dir, `${name}.ext`),
        '-out',
        join(dir, `${name}.crt`),
      ]),
    );
  };
  // The kubelet runs the pods on loopback, so that is the address the Services resolve to.
  issue('runtime', 'IP:127.0.0.1,DNS:localhost');
  issue('client', 'DNS:client');
  return { ca: read('ca'), server: read('runtime'), client: read('client') };
}

/** One HTTPS request; rejects on a failed handshake. */
function request(
  url: string,
  options: { ca: string; client?: Pem; token?: string; method?: string; body?: string },
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = https.request(url, {
      method: options.method ?? 'GET',
      ca: options.ca,
      ...(options.client === undefined ? {} : { cert: options.client.cert, key: options.client.key }),
      headers: {
        'content-type': 'application/json',
        ...(options.token === undefined ? {} : { authorization: `Bearer ${options.token}` }),
      },
      agent: false,
    });
    req.on('error', reject);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
    });
    req.end(options.body);
  });
}

describe('operator end to end with spec.tls: HTTPS listeners and client certificates', () => {
  let dir: string;
  let pem: ReturnType<typeof certificates>;
  let db: TestDatabase;
  let h: Harness;
  let kubelet: Kubelet;
  let operator: OperatorHandle;
  let endpoint: SdkEndpoint;

  async function waitReady(resource: string): Promise<void> {
    const res = await kubectl(h, ['wait', '-n', NS, '--for=condition=Ready', resource, '--timeout=120s'], 150_000);
    expect(res.stderr, `${resource} did not become Ready\n${diagnostics()}`).toBe('');
    expect(res.code).toBe(0);
  }

  function diagnostics(): string {
    const objects = h.fake
      .list('ratchet.dev/v1alpha1', 'Cluster', NS)
      .concat(h.fake.list('ratchet.dev/v1alpha1', 'Deployment', NS));
    const pods = kubelet.pods().map((p) => `${p.name} ready=${p.ready}\n${p.output.slice(-3000)}`);
    return `${JSON.stringify(
      objects.map((o) => ({ name: o.metadata.name, status: o['status'] })),
      null,
      1,
    )}\n${pods.join('\n')}`;
  }

  function clusterStatus(): { endpoints?: Record<string, string> } {
    const cluster = h.fake.get({ apiVersion: 'ratchet.dev/v1alpha1', kind: 'Cluster', namespace: NS, name: CLUSTER });
    return cluster?.['status'] ?? {};
  }

  function url(service: string, port: number): string {
    const u = kubelet.serviceUrl(NS, service, port, 'https');
    expect(u).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    return u;
  }

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ratchet-operator-tls-e2e-'));
    pem = certificates(dir);
    db = await createTestDatabase();
    h = await startHarness({ rbac: true, namespaces: ['ratchet-system', NS] });
    await installOperator(h);
    kubelet = await startKubelet({ kubeconfigPath: h.kubeconfig, namespaces: [NS] });
    operator = await startTestOperator(h, {
      name: 'ratchet-operator-tls-e2e',
      serviceUrl: (namespace, service, port, scheme) => kubelet.serviceUrl(namespace, service, port, scheme),
    });
    endpoint = await startEndpoint({
      services: [
        restate.service({
          name: 'Greeter',
          handlers: { greet: async (_ctx: restate.Context, name: string) => `hello ${name}` },
        }),
      ],
      transport: 'h2',
    });
  });

  afterAll(async () => {
    await operator?.stop(5_000);
    await kubelet?.stop();
    await endpoint?.close();
    await h?.stop();
    await db?.drop();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it(
    'becomes Ready over HTTPS with client certificates, registers a Deployment, and serves clients that have one',
    {
      timeout: 240_000,
    },
    async () => {
      await applyAsUser(h, [
        { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'main-db', namespace: NS }, stringData: { uri: db.url } },
        {
          apiVersion: 'v1',
          kind: 'Secret',
          type: 'kubernetes.io/tls',
          metadata: { name: 'main-tls', namespace: NS },
          stringData: { 'tls.crt': pem.server.cert, 'tls.key': pem.server.key, 'ca.crt': pem.ca.cert },
        },
        {
          apiVersion: 'ratchet.dev/v1alpha1',
          kind: 'Cluster',
          metadata: { name: CLUSTER, namespace: NS },
          spec: {
            image: 'ghcr.io/ratchet-dev/ratchet-runtime:dev',
            replicas: 1,
            database: { secretRef: { name: 'main-db' } },
            tls: { secretRef: { name: 'main-tls' }, clientAuth: { caSecretRef: { name: 'main-tls' } } },
          },
        },
      ]);
      // Ready needs GET /version on the admin listener: the operator trusted ca.crt and presented the Secret's key pair.
      await waitReady(`clusters.ratchet.dev/${CLUSTER}`);
      // The observability probe goes the same way; its endpoint is published once it answers.
      await expect
        .poll(() => clusterStatus().endpoints?.['observability'], { timeout: 30_000 })
        .toBe(`https://${CLUSTER}-observability.${NS}.svc:3100`);
      expect(clusterStatus().endpoints).toMatchObject({
        ingress: `https://${CLUSTER}-ingress.${NS}.svc:8080`,
        admin: `https://${CLUSTER}-admin.${NS}.svc:9070`,
      });

      // The Deployment controller reaches the admin API through the same TLS target.
      await applyAsUser(h, [
        {
          apiVersion: 'ratchet.dev/v1alpha1',
          kind: 'Deployment',
          metadata: { name: 'greeter', namespace: NS },
          spec: { clusterRef: { name: CLUSTER }, endpoint: { http: { uri: endpoint.url } } },
        },
      ]);
      await waitReady('deployments.ratchet.dev/greeter');

      const token = Buffer.from(
        (
          h.fake.get({ apiVersion: 'v1', kind: 'Secret', namespace: NS, name: `${CLUSTER}-token` })!['data'] as Record<
            string,
            string
          >
        )['token']!,
        'base64',
      ).toString('utf8');
      const greet = `${url(`${CLUSTER}-ingress`, 8080)}/Greeter/greet`;
      const answer = await request(greet, {
        ca: pem.ca.cert,
        client: pem.client,
        token,
        method: 'POST',
        body: '"tls"',
      });
      expect(answer).toEqual({ status: 200, text: '"hello tls"' });
      // No client certificate: the handshake fails before any request is read.
      await expect(request(greet, { ca: pem.ca.cert, token, method: 'POST', body: '"tls"' })).rejects.toThrow();
      // Plain HTTP on the same port gets no answer a client could mistake for success.
      const plain = await fetch(greet.replace('https:', 'http:'), { method: 'POST', body: '"tls"' }).then(
        (r) => r.status,
        () => 0,
      );
      expect(plain === 0 || plain >= 400).toBe(true);
    },
  );
});
