import { isIP, isIPv4, isIPv6 } from 'node:net';
import { UnitFormatError } from './units.ts';

/** Where a listener binds. `host` is what `server.listen({ host, port })` takes: IPv6 without brackets. */
export interface BindAddress {
  readonly host: string;
  readonly port: number;
}

const HOSTNAME_LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/i;

function isHostname(host: string): boolean {
  // All-numeric dotted names look like IPv4 addresses; they must be valid ones then, not hostnames.
  if (/^[\d.]+$/.test(host)) return isIPv4(host);
  return host.length <= 253 && host.split('.').every((label) => HOSTNAME_LABEL.test(label));
}

const EXPECTED = "expected host:port, e.g. '127.0.0.1:8080', '0.0.0.0:9070', 'localhost:0' or '[::1]:8080'";

/**
 * Parses `host:port`; IPv6 hosts go in brackets (`[::1]:8080`). Port 0 asks the OS for a free port (tests use it).
 * Throws `UnitFormatError`.
 */
export function parseBindAddress(input: string): BindAddress {
  const text = input.trim();
  let host: string;
  let portText: string;
  if (text.startsWith('[')) {
    const close = text.indexOf(']');
    if (close < 0 || text[close + 1] !== ':') throw new UnitFormatError(`invalid address '${input}': ${EXPECTED}`);
    host = text.slice(1, close);
    portText = text.slice(close + 2);
    if (!isIPv6(host)) throw new UnitFormatError(`invalid address '${input}': '${host}' is not an IPv6 address`);
  } else {
    const colon = text.lastIndexOf(':');
    if (colon < 0) throw new UnitFormatError(`invalid address '${input}': the port is missing, ${EXPECTED}`);
    host = text.slice(0, colon);
    portText = text.slice(colon + 1);
    if (host.includes(':')) {
      throw new UnitFormatError(`invalid address '${input}': write IPv6 addresses in brackets, e.g. '[::1]:8080'`);
    }
    if (host.length === 0) throw new UnitFormatError(`invalid address '${input}': the host is missing, ${EXPECTED}`);
    if (!isHostname(host))
      throw new UnitFormatError(`invalid address '${input}': '${host}' is not an IP address or host name`);
  }
  if (!/^\d{1,5}$/.test(portText) || Number(portText) > 65535) {
    throw new UnitFormatError(`invalid address '${input}': the port must be a number from 0 to 65535`);
  }
  return { host, port: Number(portText) };
}

/** `{ host: '::1', port: 8080 }` → `[::1]:8080`. */
export function formatBindAddress(address: BindAddress): string {
  return isIP(address.host) === 6 ? `[${address.host}]:${address.port}` : `${address.host}:${address.port}`;
}
