import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Certificates for the TLS tests, made by the real `openssl` (installed by `.ci/run` when missing): a self-signed
 * server certificate for 127.0.0.1/localhost, and a small CA issuing client certificates.
 */

export interface CertFiles {
  certFile: string;
  keyFile: string;
  /** SHA-256 fingerprint as Node prints it (`AA:BB:…`). */
  fingerprint: string;
}

function openssl(args: string[]): void {
  execFileSync('openssl', args, { stdio: 'ignore' });
}

function files(dir: string, name: string): CertFiles {
  const certFile = join(dir, `${name}.crt`);
  const keyFile = join(dir, `${name}.key`);
  return { certFile, keyFile, fingerprint: '' };
}

function withFingerprint(f: CertFiles): CertFiles {
  return { ...f, fingerprint: new X509Certificate(readFileSync(f.certFile)).fingerprint256 };
}

/** A self-signed certificate for 127.0.0.1 and localhost, written as `<name>.crt` / `<name>.key` in `dir`. */
export function selfSignedServer(dir: string, name = 'server', cn = 'localhost'): CertFiles {
  const f = files(dir, name);
  openssl([
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-days',
    '2',
    '-subj',
    `/CN=${cn}`,
    '-addext',
    'subjectAltName=IP:127.0.0.1,DNS:localhost',
    '-keyout',
    f.keyFile,
    '-out',
    f.certFile,
  ]);
  return withFingerprint(f);
}

/** A CA (`<name>.crt`/`.key`) and a client certificate it issued (`<client>.crt`/`.key`). */
export function clientCa(dir: string, name = 'client-ca', client = 'client'): { ca: CertFiles; client: CertFiles } {
  const ca = files(dir, name);
  openssl([
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-days',
    '2',
    '-subj',
    `/CN=${name}`,
    '-keyout',
    ca.keyFile,
    '-out',
    ca.certFile,
  ]);
  const c = files(dir, client);
  const csr = join(dir, `${client}.csr`);
  openssl([
    'req',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-subj',
    `/CN=${client}`,
    '-keyout',
    c.keyFile,
    '-out',
    csr,
  ]);
  openssl([
    'x509',
    '-req',
    '-in',
    csr,
    '-CA',
    ca.certFile,
    '-CAkey',
    ca.keyFile,
    '-CAcreateserial',
    '-days',
    '2',
    '-out',
    c.certFile,
  ]);
  return { ca: withFingerprint(ca), client: withFingerprint(c) };
}
