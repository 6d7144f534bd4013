import { describe, expect, it } from 'vitest';

import { stateVersion } from '../../../runtime/src/ids/state-version.ts';

const utf8 = (s: string): Uint8Array => Buffer.from(s, 'utf8');

describe('state version', () => {
  it('matches the http-api §A.3 vector name=bob', () => {
    expect(stateVersion([['name', utf8('bob')]])).toBe('tDqA04Lj3_qJ-PgNPTecXDGZgpwy6jm2Ni2BYqJIthM');
    expect(stateVersion(new Map([['name', utf8('bob')]]))).toBe('tDqA04Lj3_qJ-PgNPTecXDGZgpwy6jm2Ni2BYqJIthM');
    expect(stateVersion([[utf8('name'), utf8('bob')]])).toBe('tDqA04Lj3_qJ-PgNPTecXDGZgpwy6jm2Ni2BYqJIthM');
  });

  it('is the hash of nothing for an empty state', () => {
    expect(stateVersion([])).toBe('47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU');
  });

  it('does not depend on insertion order but does on content', () => {
    const a = stateVersion([
      ['b', utf8('2')],
      ['a', utf8('1')],
    ]);
    const b = stateVersion([
      ['a', utf8('1')],
      ['b', utf8('2')],
    ]);
    expect(a).toBe(b);
    expect(stateVersion([['ab', utf8('')]])).not.toBe(stateVersion([['a', utf8('b')]]));
  });

  it('orders keys by UTF-8 bytes', () => {
    // U+FF61 sorts after U+1F600 in UTF-16 code units but before it in UTF-8 bytes
    const forward = stateVersion([
      ['\uff61', utf8('x')],
      ['\u{1f600}', utf8('y')],
    ]);
    const backward = stateVersion([
      ['\u{1f600}', utf8('y')],
      ['\uff61', utf8('x')],
    ]);
    expect(forward).toBe(backward);
  });
});
