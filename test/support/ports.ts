import { createServer } from 'node:net';

/** The loopback interface every test listener binds to; never a wildcard address. */
export const LOOPBACK = '127.0.0.1';

/**
 * A TCP port on 127.0.0.1 that was free a moment ago: the kernel picks it (listen on port 0), we read it and close.
 * Another process may still take it before the caller binds, so callers that can retry on EADDRINUSE should.
 */
export async function freePort(): Promise<number> {
  // The kernel may hand out a port it just gave us again; a test that asks for several needs them distinct.
  for (;;) {
    const port = await kernelPort();
    if (given.has(port)) continue;
    given.add(port);
    return port;
  }
}

const given = new Set<number>();

function kernelPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen({ host: LOOPBACK, port: 0, exclusive: true }, () => {
      const address = server.address();
      if (address === null || typeof address === 'string') {
        server.close();
        reject(new Error(`unexpected listen address ${String(address)}`));
        return;
      }
      const { port } = address;
      server.close((err) => (err ? reject(err) : resolve(port)));
    });
  });
}

/** `127.0.0.1:<port>`, the form the `RATCHET_*_BIND` variables and restate-server's `bind-address` take. */
export function bindAddr(port: number): string {
  return `${LOOPBACK}:${port}`;
}

/** `http://127.0.0.1:<port>` (no trailing slash). */
export function loopbackUrl(port: number): string {
  return `http://${LOOPBACK}:${port}`;
}
