import { createHmac, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import { checkServerIdentity, type PeerCertificate } from 'node:tls';
import type { ListenerTls } from '../listeners/tls.ts';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { PartitionUnavailableError } from '../engine/management-errors.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import type { NodeRow } from './membership.ts';

/** Set on a request one node sends on to another: the receiver never forwards it again. */
export const FORWARDED_BY_HEADER = 'x-ratchet-forwarded-by';
/**
 * Set with FORWARDED_BY_HEADER: HMAC-SHA256 of the sending node's name under the cluster's forwarding secret
 * (`ratchet.meta`), so that a receiver can tell a peer's request from a client's that carries the header (a request a
 * peer forwards was admitted and counted by the ingress limit there already).
 */
export const FORWARDED_PROOF_HEADER = 'x-ratchet-forwarded-proof';

export function forwardingProof(secret: string, node: string): string {
  return createHmac('sha256', secret).update(node).digest('hex');
}

/** Whether `req` was sent on by a node of this cluster (its proof matches the node it names). */
export function forwardedByPeer(secret: string, headers: Record<string, string | string[] | undefined>): boolean {
  const node = headers[FORWARDED_BY_HEADER];
  const proof = headers[FORWARDED_PROOF_HEADER];
  if (typeof node !== 'string' || typeof proof !== 'string') return false;
  const expected = Buffer.from(forwardingProof(secret, node), 'utf8');
  const given = Buffer.from(proof, 'utf8');
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** On a 421 answer: the receiver does not serve the partition (the sender re-reads who does and tries again). */
const NOT_SERVED_HEADER = 'x-ratchet-not-served';

const HOP_BY_HOP = new Set([
  FORWARDED_PROOF_HEADER,
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
  'te',
  'trailer',
  'host',
  'content-length',
  'http2-settings',
]);

export type Listener = 'ingress' | 'admin';

/** Who serves what, as this node knows it (the cluster coordinator). */
export interface OwnerDirectory {
  readonly node: string;
  ownerOf(partition: number): NodeRow | undefined;
  refresh(): Promise<void>;
  /** This process serves the partition now. */
  serves(partition: number): boolean;
}

export interface RouterOptions {
  /** How long a request for a partition without a reachable owner waits for one. */
  partitionWaitMs: number;
  /**
   * The listeners' certificates when they serve HTTPS: the owner's listener is reached over HTTPS, trusting this
   * node's own certificate chain and client CA (every replica serves the cluster's certificate), presenting this
   * node's certificate when the listeners require client certificates.
   */
  tls?: Partial<Record<Listener, ListenerTls | undefined>>;
  /** The cluster's forwarding secret: forwarded requests carry a proof made with it. */
  forwardingSecret?: string;
}

/**
 * Any node accepts any request: one for a partition another node owns is sent on to the owner's listener over HTTP
 * (and its answer returned as is); one for a partition between owners waits, bounded, for the next owner. The engine
 * refuses a request for a partition it does not serve before writing anything, so sending it on is always safe. If
 * the connection to the owner fails after the request was sent, the outcome is unknown and the client is told so.
 */
export class RequestRouter {
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  /** Per listener served over HTTPS: the agent for the certificate in service (a new one after a rotation). */
  private readonly tlsAgents = new Map<Listener, { fingerprint: string; agent: https.Agent }>();
  private lastRefresh = 0;

  constructor(
    private readonly directory: OwnerDirectory,
    private readonly options: RouterOptions,
    private readonly metrics: Metrics,
    private readonly log: Logger,
  ) {}

  close(): void {
    this.agent.destroy();
    for (const { agent } of this.tlsAgents.values()) agent.destroy();
    this.tlsAgents.clear();
  }

  /** The HTTPS agent for `listener`, or undefined when it serves plain HTTP. */
  private tlsAgent(listener: Listener): https.Agent | undefined {
    const tls = this.options.tls?.[listener];
    if (tls === undefined) return undefined;
    const fingerprint = tls.fingerprint;
    const current = this.tlsAgents.get(listener);
    if (current?.fingerprint === fingerprint) return current.agent;
    current?.agent.destroy();
    const own = tls.options;
    const agent = new https.Agent({
      keepAlive: true,
      maxSockets: 256,
      ca: own.ca === undefined ? [own.cert] : [own.cert, own.ca],
      // A CA-issued certificate (cert-manager's) is a trust anchor itself: the issuing CA need not be configured.
      allowPartialTrustChain: true,
      ...(own.requestCert ? { cert: own.cert, key: own.key } : {}),
      // Peers are addressed by their advertised address, which the certificate need not name: a peer presenting this
      // cluster's very certificate (verified against the chain above) is the peer; otherwise the usual name check.
      checkServerIdentity: (host: string, peer: PeerCertificate) =>
        peer.fingerprint256 === fingerprint ? undefined : checkServerIdentity(host, peer),
    });
    this.tlsAgents.set(listener, { fingerprint, agent });
    return agent;
  }

  async serve(listener: Listener, req: FastifyRequest, reply: FastifyReply, partition: number): Promise<unknown> {
    if (
      req.headers[FORWARDED_BY_HEADER] !== undefined &&
      this.directory.ownerOf(partition)?.name !== this.directory.node
    ) {
      // Sent here by a node that believed this one owns the partition: it re-reads the owner and tries again.
      this.metrics.forwardedRequests.inc({ listener, result: 'misdirected' });
      return reply
        .code(421)
        .header(NOT_SERVED_HEADER, String(partition))
        .header('content-type', 'application/json')
        .send(JSON.stringify({ message: `partition ${partition} is not served by this node` }));
    }
    const deadline = Date.now() + this.options.partitionWaitMs;
    let waited = false;
    // The client went away before the answer: so does the request to the owner (one listener for all tries).
    const cancel = new AbortController();
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished) cancel.abort();
    });
    // With the client's idempotency key (or for a read) a request whose fate is unknown can be sent again: the owner
    // answers a repeat from what it stored.
    const repeatable = req.method === 'GET' || req.headers['idempotency-key'] !== undefined;
    for (;;) {
      const owner = this.directory.ownerOf(partition);
      const usable = owner !== undefined && (owner.name !== this.directory.node || this.directory.serves(partition));
      if (usable) {
        const address = listener === 'ingress' ? owner.ingressAddress : owner.adminAddress;
        const result = await this.forward(address, req, cancel.signal, this.tlsAgent(listener));
        if (result.kind === 'answer') {
          this.metrics.forwardedRequests.inc({ listener, result: 'forwarded' });
          reply.code(result.status);
          for (const [name, value] of Object.entries(result.headers)) {
            if (value !== undefined && !HOP_BY_HOP.has(name)) reply.header(name, value);
          }
          return reply.send(result.body);
        }
        if (result.kind === 'unknown' && !(repeatable && Date.now() < deadline && !cancel.signal.aborted)) {
          this.metrics.forwardedRequests.inc({ listener, result: 'failed' });
          this.log.warn({ err: result.error, owner: owner.name, partition }, 'forwarding to the owner failed');
          throw new ForwardingFailedError(partition, owner.name, result.error);
        }
        // Not served there (moved meanwhile) or not reachable (it died): find the owner again.
      }
      if (Date.now() >= deadline) {
        this.metrics.forwardedRequests.inc({ listener, result: 'no_owner' });
        throw new NoOwnerError(partition, this.options.partitionWaitMs, waited);
      }
      waited = true;
      await sleep(50);
      if (Date.now() - this.lastRefresh >= 100) {
        this.lastRefresh = Date.now();
        await this.directory.refresh().catch(() => undefined);
      }
    }
  }

  private forward(
    address: string,
    req: FastifyRequest,
    signal: AbortSignal,
    tlsAgent: https.Agent | undefined,
  ): Promise<
    | { kind: 'answer'; status: number; headers: http.IncomingHttpHeaders; body: Buffer }
    | { kind: 'retry' }
    | { kind: 'unknown'; error: Error }
  > {
    const headers: http.OutgoingHttpHeaders = {};
    const raw = req.raw.rawHeaders;
    for (let i = 0; i + 1 < raw.length; i += 2) {
      const name = raw[i]!.toLowerCase();
      if (HOP_BY_HOP.has(name) || name.startsWith(':')) continue;
      const prev = headers[name];
      headers[name] = prev === undefined ? raw[i + 1]! : `${String(prev)}, ${raw[i + 1]!}`;
    }
    headers[FORWARDED_BY_HEADER] = this.directory.node;
    if (this.options.forwardingSecret !== undefined) {
      headers[FORWARDED_PROOF_HEADER] = forwardingProof(this.options.forwardingSecret, this.directory.node);
    }
    const body = Buffer.isBuffer(req.body) ? req.body : undefined;
    if (body !== undefined) headers['content-length'] = String(body.length);
    // The URL as the client sent it (the ingress routes every request as `/` and parses the original itself).
    const url = new URL(req.originalUrl, `${tlsAgent === undefined ? 'http' : 'https'}://${address}`);
    const client = tlsAgent === undefined ? http : https;
    return new Promise((resolve) => {
      let sent = false;
      const out = client.request(url, { method: req.method, headers, agent: tlsAgent ?? this.agent }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          if (res.statusCode === 421 && res.headers[NOT_SERVED_HEADER] !== undefined) resolve({ kind: 'retry' });
          else
            resolve({
              kind: 'answer',
              status: res.statusCode ?? 502,
              headers: res.headers,
              body: Buffer.concat(chunks),
            });
        });
        res.on('error', (error) => resolve({ kind: 'unknown', error }));
      });
      out.on('finish', () => (sent = true));
      out.on('error', (error) => {
        // Refused or reset before the request was written: it never reached the owner, so trying again is safe.
        const code = (error as NodeJS.ErrnoException).code;
        if (!sent || code === 'ECONNREFUSED') resolve({ kind: 'retry' });
        else resolve({ kind: 'unknown', error });
      });
      const abort = (): void => void out.destroy(new Error('the client closed the connection'));
      if (signal.aborted) abort();
      else signal.addEventListener('abort', abort, { once: true });
      out.once('close', () => signal.removeEventListener('abort', abort));
      out.end(body);
    });
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** No live owner took the partition within the wait (every node that could is down or still recovering it). */
export class NoOwnerError extends PartitionUnavailableError {
  constructor(partition: number, waitMs: number, waited: boolean) {
    super(`partition ${partition}`);
    this.message =
      `partition ${partition} has no reachable owner${waited ? ` (waited ${waitMs} ms for one)` : ''}: ` +
      'its node is down or the partition is moving, and PostgreSQL may be unreachable; retrying the request is safe';
  }
}

/** The owner's connection failed after the request was sent: it may or may not have been acted on. */
export class ForwardingFailedError extends PartitionUnavailableError {
  constructor(partition: number, owner: string, cause: Error) {
    super(`partition ${partition}`);
    this.message =
      `the request was sent to node ${owner}, which owns partition ${partition}, and its connection failed before ` +
      `it answered (${cause.message}); it may have been acted on: retry with the same idempotency key`;
  }
}
