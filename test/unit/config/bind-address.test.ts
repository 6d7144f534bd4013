import { describe, expect, it } from 'vitest';
import { formatBindAddress, parseBindAddress } from '../../../runtime/src/config/bind-address.ts';
import { UnitFormatError } from '../../../runtime/src/config/units.ts';

describe('bind addresses', () => {
  it.each([
    ['127.0.0.1:8080', '127.0.0.1', 8080],
    ['0.0.0.0:9070', '0.0.0.0', 9070],
    ['localhost:0', 'localhost', 0],
    ['ratchet-admin.default.svc:9070', 'ratchet-admin.default.svc', 9070],
    ['[::1]:8080', '::1', 8080],
    ['[::]:65535', '::', 65535],
    ['[fe80::1]:3100', 'fe80::1', 3100],
    ['[::ffff:127.0.0.1]:5122', '::ffff:127.0.0.1', 5122],
  ])('%s → host %s, port %d, and back', (input, host, port) => {
    const parsed = parseBindAddress(input);
    expect(parsed).toEqual({ host, port });
    expect(formatBindAddress(parsed)).toBe(input);
  });

  it.each([
    ['8080', /port is missing/],
    [':8080', /host is missing/],
    ['::1:8080', /brackets/],
    ['[::1]8080', /expected host:port/],
    ['[::1]', /expected host:port/],
    ['[localhost]:80', /not an IPv6 address/],
    ['127.0.0.1:', /port must be/],
    ['127.0.0.1:65536', /port must be/],
    ['127.0.0.1:-1', /port must be/],
    ['127.0.0.1:80a', /port must be/],
    ['300.1.1.1:80', /not an IP address or host name/],
    ['bad_host:80', /not an IP address or host name/],
  ])('%j is refused', (input, message) => {
    expect(() => parseBindAddress(input)).toThrow(UnitFormatError);
    expect(() => parseBindAddress(input)).toThrow(message);
  });
});
