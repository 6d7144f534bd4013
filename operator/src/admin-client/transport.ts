import { createHash } from 'node:crypto';
import https from 'node:https';
import type { ClientTls } from './types.ts';

/*
 * One HTTP exchange with a runtime listener. Plain `http:` (and `https:` without TLS options, trusting the system
 * roots) goes through fetch. `https:` with TLS options goes through node:https: Node's fetch takes no CA or client
 * certificate without undici's own Agent, which is not a dependency.
 */

export interface HttpCall {
  readonly method: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: string;
  readonly signal: AbortSignal;
}

export interface HttpAnswer {
  readonly status: number;
  readonly text: string;
}

/** Keep-alive agents by TLS material, so that reconciles reuse connections; a renewed certificate makes a new one. */
const agents = new Map<string, https.Agent>();
/** A few clusters' worth; the oldest agent (a certificate since renewed, a cluster deleted) goes first. */
const MAX_AGENTS = 32;

function agentFor(tls: ClientTls): https.Agent {
  const key = createHash('sha256')
    .update(JSON.stringify([tls.ca, tls.cert ?? '', tls.key ?? '']))
    .digest('hex');
  const found = agents.get(key);
  if (found !== undefined) return found;
  const agent = new https.Agent({
    keepAlive: true,
    ca: tls.ca,
    ...(tls.cert === undefined ? {} : { cert: tls.cert }),
    ...(tls.key === undefined ? {} : { key: tls.key }),
    // A certificate in `ca` is an anchor as it stands: the listener's own certificate (or an intermediate CA) when
    // the Secret has no self-signed root in ca.crt.
    allowPartialTrustChain: true,
  });
  agents.set(key, agent);
  if (agents.size > MAX_AGENTS) {
    const [oldestKey, oldest] = agents.entries().next().value as [string, https.Agent];
    agents.delete(oldestKey);
    oldest.destroy();
  }
  return agent;
}

function overHttps(url: string, call: HttpCall, tls: ClientTls): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const req = https.request(url, {
      method: call.method,
      headers: call.headers,
      agent: agentFor(tls),
      signal: call.signal,
    });
    req.on('error', reject);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', reject);
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
    });
    req.end(call.body);
  });
}

/** Rejects with the network error (refused, reset, TLS verification, AbortSignal's TimeoutError) as it comes. */
export async function httpCall(
  url: string,
  call: HttpCall,
  tls: ClientTls | undefined,
  doFetch: typeof fetch = fetch,
): Promise<HttpAnswer> {
  if (tls !== undefined && url.startsWith('https:')) return overHttps(url, call, tls);
  const res = await doFetch(url, {
    method: call.method,
    headers: call.headers,
    ...(call.body === undefined ? {} : { body: call.body }),
    signal: call.signal,
  });
  return { status: res.status, text: await res.text() };
}
