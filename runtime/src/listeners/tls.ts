import { X509Certificate } from 'node:crypto';
import { readFileSync, unwatchFile, watchFile, type Stats } from 'node:fs';
import { createSecureContext, type SecureContextOptions, type Server as TlsServer } from 'node:tls';
import type { Logger } from 'pino';
import type { TlsFilesConfig } from '../config/config.ts';
import { ConfigError } from '../errors/config-errors.ts';

/**
 * The certificate of an HTTPS listener (ingress, admin, observability), loaded from PEM files and re-read when they
 * change: cert-manager (or anyone) rotates them in place and the listener serves the new pair to new connections,
 * without a restart. A pair that cannot be used (unreadable, not matching) is refused at startup with RT0002 naming
 * the variable; after startup it is logged and the previous pair stays in service.
 *
 * With a client CA, clients must present a certificate it issued (mutual TLS).
 */

/** How often the files' modification times are checked (polling survives Kubernetes' symlink swaps). */
const WATCH_INTERVAL_MS = 2_000;

export interface ListenerTlsOptions {
  key: Buffer;
  cert: Buffer;
  ca?: Buffer;
  requestCert: boolean;
  rejectUnauthorized: boolean;
}

export class ListenerTls {
  private current: ListenerTlsOptions;
  private servers: TlsServer[] = [];
  private watching = false;

  constructor(
    private readonly files: TlsFilesConfig,
    /** `RATCHET_INGRESS_TLS` or `RATCHET_TLS`: what an error names. */
    private readonly variable: string,
    private readonly log: Logger,
  ) {
    this.current = ListenerTls.load(files, variable);
  }

  /** What `https.createServer` / `http2.createSecureServer` (fastify's `https`) take. */
  get options(): ListenerTlsOptions {
    return this.current;
  }

  /** SHA-256 fingerprints of the leaf certificate in service (peers of the cluster present the same). */
  get fingerprint(): string {
    return new X509Certificate(this.current.cert).fingerprint256;
  }

  /** Serves rotated files on `server` from now on. */
  attach(server: TlsServer): void {
    this.servers.push(server);
    if (this.watching) return;
    this.watching = true;
    for (const file of this.paths()) watchFile(file, { interval: WATCH_INTERVAL_MS, persistent: false }, this.changed);
  }

  stop(): void {
    if (!this.watching) return;
    this.watching = false;
    for (const file of this.paths()) unwatchFile(file, this.changed);
    this.servers = [];
  }

  /** Reads the files again now (the watcher calls this when one changed). */
  reload(): boolean {
    let next: ListenerTlsOptions;
    try {
      next = ListenerTls.load(this.files, this.variable);
    } catch (err) {
      this.log.warn(
        { err, certFile: this.files.certFile, keyFile: this.files.keyFile },
        'the TLS files changed but cannot be used; the previous certificate stays in service',
      );
      return false;
    }
    this.current = next;
    for (const server of this.servers) server.setSecureContext(secureContextOptions(next));
    this.log.info(
      { certFile: this.files.certFile, fingerprint: this.fingerprint },
      'TLS certificate reloaded; new connections get it',
    );
    return true;
  }

  private readonly changed = (curr: Stats, prev: Stats): void => {
    if (curr.mtimeMs === prev.mtimeMs && curr.size === prev.size && curr.ino === prev.ino) return;
    // The key and the certificate are usually replaced together: give the second write a moment.
    setTimeout(() => this.reload(), 200).unref();
  };

  private paths(): string[] {
    return [
      this.files.certFile,
      this.files.keyFile,
      ...(this.files.clientCaFile === undefined ? [] : [this.files.clientCaFile]),
    ];
  }

  private static load(files: TlsFilesConfig, variable: string): ListenerTlsOptions {
    const read = (path: string, suffix: string): Buffer => {
      try {
        return readFileSync(path);
      } catch (err) {
        throw ConfigError.invalidValue(`${variable}_${suffix}`, `cannot read ${path}: ${(err as Error).message}`, {
          cause: err,
        });
      }
    };
    const cert = read(files.certFile, 'CERT');
    const key = read(files.keyFile, 'KEY');
    const ca = files.clientCaFile === undefined ? undefined : read(files.clientCaFile, 'CLIENT_CA');
    const options: ListenerTlsOptions = {
      key,
      cert,
      ...(ca === undefined ? {} : { ca }),
      requestCert: ca !== undefined,
      rejectUnauthorized: ca !== undefined,
    };
    try {
      createSecureContext(secureContextOptions(options));
      new X509Certificate(cert);
    } catch (err) {
      throw ConfigError.invalidValue(
        `${variable}_CERT`,
        `the certificate, key${ca === undefined ? '' : ' and client CA'} are not usable PEM: ${(err as Error).message}`,
        { cause: err },
      );
    }
    return options;
  }
}

function secureContextOptions(o: ListenerTlsOptions): SecureContextOptions {
  return { key: o.key, cert: o.cert, ...(o.ca === undefined ? {} : { ca: o.ca }) };
}
