import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAdminClient } from '../../../../operator/src/admin-client/client.ts';
import { AdminApiError, type ClientTls } from '../../../../operator/src/admin-client/types.ts';

/*
 * The admin client over HTTPS, against real TLS servers with certificates made by openssl as cert-manager would make
 * them: a CA issuing a certificate for 127.0.0.1. The operator trusts the Secret's ca.crt, or without one the
 * certificate itself (not self-signed, so only as a partial chain), refuses a certificate it cannot verify, and presents
 * a client certificate to a listener that requires one.
 */

interface Pem {
  cert: string;
  key: string;
}

let dir: string;
let ca: Pem;
let otherCa: Pem;
let server: Pem;
let client: Pem;

function openssl(args: string[]): void {
  execFileSync('openssl', args, { stdio: 'ignore' });
}

function selfSignedCa(name: string): Pem {
  const key = join(dir, `${name}.key`);
  const cert = join(dir, `${name}.crt`);
  openssl(
    ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2'].concat([
      '-subj',
      `/CN=${name}`,
      '-keyout',
      key,
      '-out',
      cert,
    ]),
  );
  return { cert: readFileSync(cert, 'utf8'), key: readFileSync(key, 'utf8') };
}

/** A leaf issued by `issuer` (its files in dir), with the given subjectAltName, no extended key usage (any use). */
function issued(name: string, issuer: string, san: string): Pem {
  const key = join(dir, `${name}.key`);
  const csr = join(dir, `${name}.csr`);
  const cert = join(dir, `${name}.crt`);
  const ext = join(dir, `${name}.ext`);
  writeFileSync(ext, `subjectAltName=${san}\n`);
  openssl(
    ['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-subj', `/CN=${name}`].concat([
      '-keyout',
      key,
      '-out',
      csr,
    ]),
  );
  openssl(
    ['x509', '-req', '-in', csr, '-CA', join(dir, `${issuer}.crt`), '-CAkey', join(dir, `${issuer}.key`)].concat([
      '-CAcreateserial',
      '-days',
      '2',
      '-extfile',
      ext,
      '-out',
      cert,
    ]),
  );
  return { cert: readFileSync(cert, 'utf8'), key: readFileSync(key, 'utf8') };
}

interface Listener {
  url: string;
  authorization: (string | undefined)[];
  clients: (string | undefined)[];
  close(): Promise<void>;
}

/** An admin listener answering GET /version; with `clientCa` it requires and verifies client certificates. */
async function listen(pem: Pem, clientCa?: string): Promise<Listener> {
  const authorization: (string | undefined)[] = [];
  const clients: (string | undefined)[] = [];
  const srv = https.createServer(
    {
      cert: pem.cert,
      key: pem.key,
      ...(clientCa === undefined ? {} : { ca: clientCa, requestCert: true, rejectUnauthorized: true }),
    },
    (req, res) => {
      authorization.push(req.headers.authorization);
      clients.push((req.socket as TLSSocket).getPeerCertificate().subject?.CN?.toString());
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ version: '0.1.0', min_admin_api_version: 1, max_admin_api_version: 3 }));
    },
  );
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  return {
    url: `https://127.0.0.1:${(srv.address() as AddressInfo).port}`,
    authorization,
    clients,
    close: async () => {
      srv.closeAllConnections();
      await new Promise<void>((resolve) => srv.close(() => resolve()));
    },
  };
}

async function adminError(p: Promise<unknown>): Promise<AdminApiError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof AdminApiError) return err;
    throw err;
  }
  throw new Error('expected an AdminApiError');
}

function version(url: string, tls: ClientTls): Promise<unknown> {
  return createAdminClient({ url, token: 't0ken', tls }).version();
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'ratchet-operator-tls-'));
  ca = selfSignedCa('issuer');
  otherCa = selfSignedCa('other');
  server = issued('admin', 'issuer', 'IP:127.0.0.1,DNS:localhost');
  client = issued('ratchet-operator', 'issuer', 'DNS:ratchet-operator');
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('the admin client over HTTPS', () => {
  let plain: Listener;
  beforeAll(async () => {
    plain = await listen(server);
  });
  afterAll(() => plain.close());

  it("trusts the issuing CA (the Secret's ca.crt) and sends the bearer token inside TLS", async () => {
    expect(await version(plain.url, { ca: ca.cert })).toMatchObject({ version: '0.1.0' });
    expect(plain.authorization.at(-1)).toBe('Bearer t0ken');
  });

  it('trusts the certificate itself when the Secret has no ca.crt', async () => {
    expect(await version(plain.url, { ca: server.cert })).toMatchObject({ version: '0.1.0' });
  });

  it('refuses a certificate that does not chain to what it trusts: unreachable (status 0), saying why', async () => {
    const err = await adminError(version(plain.url, { ca: otherCa.cert }));
    expect(err.status).toBe(0);
    expect(err.message).toMatch(/unreachable: UNABLE_TO_GET_ISSUER_CERT_LOCALLY/);
  });

  it('refuses a certificate for another name, even one it trusts as an anchor', async () => {
    const elsewhere = issued('elsewhere', 'issuer', 'DNS:ratchet-admin.elsewhere.svc');
    const other = await listen(elsewhere);
    try {
      for (const trusted of [ca.cert, elsewhere.cert]) {
        const err = await adminError(version(other.url, { ca: trusted }));
        expect(err.status).toBe(0);
        expect(err.message).toMatch(/ERR_TLS_CERT_ALTNAME_INVALID/);
      }
    } finally {
      await other.close();
    }
  });
});

describe('a listener that requires client certificates', () => {
  let mutual: Listener;
  beforeAll(async () => {
    mutual = await listen(server, ca.cert);
  });
  afterAll(() => mutual.close());

  it('lets the operator in with a certificate the client CA issued', async () => {
    expect(await version(mutual.url, { ca: ca.cert, cert: client.cert, key: client.key })).toMatchObject({
      version: '0.1.0',
    });
    expect(mutual.clients.at(-1)).toBe('ratchet-operator');
    // The listener's own key pair serves as well (the default without operatorSecretRef).
    expect(await version(mutual.url, { ca: ca.cert, cert: server.cert, key: server.key })).toMatchObject({
      version: '0.1.0',
    });
    expect(mutual.clients.at(-1)).toBe('admin');
  });

  it('is unreachable without one', async () => {
    const err = await adminError(version(mutual.url, { ca: ca.cert }));
    expect(err.status).toBe(0);
    expect(mutual.clients).not.toContain(undefined);
  });
});
