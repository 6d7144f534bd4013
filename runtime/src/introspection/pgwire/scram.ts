import { createHash, createHmac, pbkdf2Sync, randomBytes, timingSafeEqual, X509Certificate } from 'node:crypto';

/*
 * SCRAM-SHA-256 (RFC 5802 / RFC 7677) as PostgreSQL uses it: the server side verifies clients of the listener (with
 * channel binding, SCRAM-SHA-256-PLUS, over TLS), the client side logs the listener into PostgreSQL (without).
 */

export const SCRAM_SHA_256 = 'SCRAM-SHA-256';
export const SCRAM_SHA_256_PLUS = 'SCRAM-SHA-256-PLUS';
const TLS_SERVER_END_POINT = 'tls-server-end-point';

/** PostgreSQL's default (scram_iterations). */
const ITERATIONS = 4096;

/** A SCRAM message was malformed (SQLSTATE 08P01). */
export class ScramProtocolError extends Error {
  override readonly name = 'ScramProtocolError';
}

function hmac(key: Buffer, data: string): Buffer {
  return createHmac('sha256', key).update(data, 'utf8').digest();
}

function sha256(data: Buffer): Buffer {
  return createHash('sha256').update(data).digest();
}

function xor(a: Buffer, b: Buffer): Buffer {
  const out = Buffer.alloc(a.length);
  for (let i = 0; i < a.length; i++) out[i] = a[i]! ^ b[i]!;
  return out;
}

/** `k=v` attributes of a SCRAM message, in order; values may contain '=' (base64). */
function attributes(message: string): [string, string][] {
  return message.split(',').map((part) => {
    if (part.length < 2 || part[1] !== '=') throw new ScramProtocolError(`malformed SCRAM attribute '${part}'`);
    return [part[0]!, part.slice(2)];
  });
}

function attribute(attrs: readonly [string, string][], name: string, message: string): string {
  const found = attrs.find(([k]) => k === name);
  if (found === undefined) throw new ScramProtocolError(`SCRAM ${message} lacks '${name}='`);
  return found[1];
}

/**
 * SASLprep (RFC 4013) as libpq and node-postgres apply it to a password before hashing: non-ASCII spaces to spaces,
 * "mapped to nothing" characters removed, NFKC. (The prohibited-character and bidi checks are skipped, as they do.)
 * The identity for the ASCII passwords and tokens Ratchet expects.
 */
export function saslprep(password: string): string {
  return password
    .replace(/[\u00A0\u1680\u2000-\u200B\u202F\u205F\u3000]/g, ' ')
    .replace(/\u00AD|\u034F|\u1806|\u180B|\u180C|\u180D|\u200C|\u200D|\u2060|[\uFE00-\uFE0F]|\uFEFF/g, '')
    .normalize('NFKC');
}

/** The salted password's keys; what a server stores instead of the password. */
export interface ScramVerifier {
  readonly salt: Buffer;
  readonly iterations: number;
  readonly storedKey: Buffer;
  readonly serverKey: Buffer;
}

export function scramVerifier(
  password: string,
  salt: Buffer = randomBytes(16),
  iterations = ITERATIONS,
): ScramVerifier {
  const salted = pbkdf2Sync(Buffer.from(saslprep(password), 'utf8'), salt, iterations, 32, 'sha256');
  const clientKey = hmac(salted, 'Client Key');
  return { salt, iterations, storedKey: sha256(clientKey), serverKey: hmac(salted, 'Server Key') };
}

/** A verifier no password matches, for exchanges that must fail without saying why (an unknown user). */
export function mockVerifier(): ScramVerifier {
  return { salt: randomBytes(16), iterations: ITERATIONS, storedKey: randomBytes(32), serverKey: randomBytes(32) };
}

/** DER of the signature algorithm OIDs whose hash `tls-server-end-point` uses (RFC 5929: MD5 and SHA-1 → SHA-256). */
const SIGNATURE_HASHES: ReadonlyMap<string, string> = new Map([
  ['2a864886f70d010104', 'sha256'], // md5WithRSAEncryption
  ['2a864886f70d010105', 'sha256'], // sha1WithRSAEncryption
  ['2a864886f70d01010b', 'sha256'], // sha256WithRSAEncryption
  ['2a864886f70d01010c', 'sha384'], // sha384WithRSAEncryption
  ['2a864886f70d01010d', 'sha512'], // sha512WithRSAEncryption
  ['2a8648ce3d040301', 'sha256'], // ecdsa-with-SHA1
  ['2a8648ce3d040302', 'sha256'], // ecdsa-with-SHA256
  ['2a8648ce3d040303', 'sha384'], // ecdsa-with-SHA384
  ['2a8648ce3d040304', 'sha512'], // ecdsa-with-SHA512
]);

/** One DER element at `at`: where its contents start and end. */
function derElement(der: Buffer, at: number): { start: number; end: number } {
  let length = der[at + 1];
  if (length === undefined) throw new Error('truncated certificate');
  let start = at + 2;
  if (length & 0x80) {
    const bytes = length & 0x7f;
    length = 0;
    for (let i = 0; i < bytes; i++) length = length * 256 + der[start + i]!;
    start += bytes;
  }
  return { start, end: start + length };
}

/**
 * The `tls-server-end-point` channel-binding data of a PEM certificate (its leaf): the hash of its DER with the hash of
 * its signature algorithm. Undefined for algorithms without one (Ed25519, RSASSA-PSS), which PostgreSQL cannot bind
 * either; SCRAM-SHA-256-PLUS is then not offered.
 */
export function tlsServerEndPoint(certPem: string | Buffer): Buffer | undefined {
  const der = new X509Certificate(certPem).raw;
  // Certificate ::= SEQUENCE { tbsCertificate, signatureAlgorithm SEQUENCE { algorithm OID, … }, signature }
  const certificate = derElement(der, 0);
  const tbs = derElement(der, certificate.start);
  const algorithm = derElement(der, tbs.end);
  if (der[algorithm.start] !== 0x06) return undefined;
  const oid = derElement(der, algorithm.start);
  const hash = SIGNATURE_HASHES.get(der.subarray(oid.start, oid.end).toString('hex'));
  return hash === undefined ? undefined : createHash(hash).update(der).digest();
}

/**
 * The server side of one exchange: `first()` takes the client-first-message and returns the server-first-message;
 * `final()` takes the client-final-message and returns the server-final-message, or undefined when the proof is wrong.
 */
export class ScramServer {
  private clientFirstBare = '';
  private serverFirst = '';
  private nonce = '';
  private gs2Header = '';

  private bound = false;

  /**
   * `mechanism` is the one the client chose; `channelBinding` the `tls-server-end-point` data when the session runs
   * over TLS and SCRAM-SHA-256-PLUS was offered.
   */
  constructor(
    private readonly verifier: ScramVerifier,
    private readonly mechanism: string,
    private readonly channelBinding: Buffer | undefined,
  ) {}

  first(clientFirst: string): string {
    // gs2-header: channel-binding flag, authzid, then the bare message.
    const comma1 = clientFirst.indexOf(',');
    const comma2 = clientFirst.indexOf(',', comma1 + 1);
    if (comma1 < 0 || comma2 < 0) throw new ScramProtocolError('malformed SCRAM client-first-message');
    const flag = clientFirst.slice(0, comma1);
    if (this.mechanism === SCRAM_SHA_256_PLUS) {
      if (flag !== `p=${TLS_SERVER_END_POINT}`) {
        throw new ScramProtocolError(
          flag.startsWith('p=')
            ? `unsupported SCRAM channel-binding type "${flag.slice(2)}"`
            : 'channel binding is required with SCRAM-SHA-256-PLUS, but the client message does not use it',
        );
      }
      this.bound = true;
    } else if (flag.startsWith('p=')) {
      throw new ScramProtocolError('the client requested channel binding without selecting SCRAM-SHA-256-PLUS');
    } else if (flag === 'y' && this.channelBinding !== undefined) {
      // The client can bind but believes the server cannot: someone removed PLUS from the offer on the way.
      throw new ScramProtocolError('SCRAM channel binding negotiation error');
    } else if (flag !== 'n' && flag !== 'y') {
      throw new ScramProtocolError('malformed SCRAM channel-binding flag');
    }
    if (clientFirst.slice(comma1 + 1, comma2) !== '') throw new ScramProtocolError('SCRAM authzid is not supported');
    this.gs2Header = clientFirst.slice(0, comma2 + 1);
    this.clientFirstBare = clientFirst.slice(comma2 + 1);
    const attrs = attributes(this.clientFirstBare);
    if (attrs[0]?.[0] === 'm') throw new ScramProtocolError('SCRAM extensions are not supported');
    const clientNonce = attribute(attrs, 'r', 'client-first-message');
    if (clientNonce === '' || /[^\x21-\x2b\x2d-\x7e]/.test(clientNonce)) {
      throw new ScramProtocolError('malformed SCRAM nonce');
    }
    this.nonce = clientNonce + randomBytes(18).toString('base64');
    this.serverFirst = `r=${this.nonce},s=${this.verifier.salt.toString('base64')},i=${this.verifier.iterations}`;
    return this.serverFirst;
  }

  final(clientFinal: string): string | undefined {
    const proofAt = clientFinal.lastIndexOf(',p=');
    if (proofAt < 0) throw new ScramProtocolError('SCRAM client-final-message lacks the proof');
    const withoutProof = clientFinal.slice(0, proofAt);
    const attrs = attributes(withoutProof);
    const binding = attribute(attrs, 'c', 'client-final-message');
    const header = Buffer.from(this.gs2Header, 'utf8');
    const expected = this.bound ? Buffer.concat([header, this.channelBinding ?? Buffer.alloc(0)]) : header;
    if (binding !== expected.toString('base64')) {
      throw new ScramProtocolError('SCRAM channel binding check failed');
    }
    if (attribute(attrs, 'r', 'client-final-message') !== this.nonce) {
      throw new ScramProtocolError('SCRAM nonce does not match');
    }
    const proof = Buffer.from(clientFinal.slice(proofAt + 3), 'base64');
    if (proof.length !== 32) throw new ScramProtocolError('malformed SCRAM proof');
    const authMessage = `${this.clientFirstBare},${this.serverFirst},${withoutProof}`;
    const clientKey = xor(proof, hmac(this.verifier.storedKey, authMessage));
    if (!timingSafeEqual(sha256(clientKey), this.verifier.storedKey)) return undefined;
    return `v=${hmac(this.verifier.serverKey, authMessage).toString('base64')}`;
  }
}

/** The client side of one exchange, for logging into PostgreSQL. */
export class ScramClient {
  private readonly clientNonce = randomBytes(18).toString('base64');
  private readonly clientFirstBare = `n=*,r=${this.clientNonce}`;
  private expectedServerSignature: Buffer | undefined;

  constructor(private readonly password: string) {}

  first(): string {
    return `n,,${this.clientFirstBare}`;
  }

  /** Takes the server-first-message, returns the client-final-message. */
  final(serverFirst: string): string {
    const attrs = attributes(serverFirst);
    const nonce = attribute(attrs, 'r', 'server-first-message');
    if (!nonce.startsWith(this.clientNonce) || nonce.length === this.clientNonce.length) {
      throw new ScramProtocolError('the server SCRAM nonce does not extend the client nonce');
    }
    const salt = Buffer.from(attribute(attrs, 's', 'server-first-message'), 'base64');
    const iterations = Number(attribute(attrs, 'i', 'server-first-message'));
    // PostgreSQL's own maximum is INT_MAX; a server asking for more than this is not worth the CPU.
    if (!Number.isSafeInteger(iterations) || iterations < 1 || iterations > 10_000_000) {
      throw new ScramProtocolError('unacceptable SCRAM iteration count');
    }
    const salted = pbkdf2Sync(Buffer.from(saslprep(this.password), 'utf8'), salt, iterations, 32, 'sha256');
    const clientKey = hmac(salted, 'Client Key');
    const withoutProof = `c=biws,r=${nonce}`;
    const authMessage = `${this.clientFirstBare},${serverFirst},${withoutProof}`;
    const proof = xor(clientKey, hmac(sha256(clientKey), authMessage));
    this.expectedServerSignature = hmac(hmac(salted, 'Server Key'), authMessage);
    return `${withoutProof},p=${proof.toString('base64')}`;
  }

  /** Checks the server-final-message: a server that cannot prove it knows the password is not PostgreSQL. */
  verify(serverFinal: string): void {
    const attrs = attributes(serverFinal);
    const error = attrs.find(([k]) => k === 'e');
    if (error !== undefined) throw new ScramProtocolError(`SCRAM authentication failed: ${error[1]}`);
    const signature = Buffer.from(attribute(attrs, 'v', 'server-final-message'), 'base64');
    const expected = this.expectedServerSignature;
    if (expected === undefined || signature.length !== expected.length || !timingSafeEqual(signature, expected)) {
      throw new ScramProtocolError('the server SCRAM signature does not match');
    }
  }
}
