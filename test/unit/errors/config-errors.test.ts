import { describe, expect, it } from 'vitest';
import {
  BindError,
  ConfigError,
  DataDirLockedError,
  StorageVersionMismatchError,
  StorageVersionMissingError,
} from '../../../runtime/src/errors/config-errors.ts';
import { RatchetError } from '../../../runtime/src/errors/errors.ts';

describe('startup errors', () => {
  it('ConfigError is RT0002 and names the key', () => {
    const error = ConfigError.invalidValue('RATCHET_ADMIN_BIND', "expected host:port, got '9070'");
    expect(error).toBeInstanceOf(RatchetError);
    expect(error).toMatchObject({ name: 'ConfigError', code: 'RT0002', status: 500, key: 'RATCHET_ADMIN_BIND' });
    expect(error.codedMessage).toBe("[RT0002] invalid value for RATCHET_ADMIN_BIND: expected host:port, got '9070'");
  });

  it('BindError is RT0004 with the listener, address and reason', () => {
    const cause = Object.assign(new Error('listen EADDRINUSE: address already in use 127.0.0.1:9070'), {
      code: 'EADDRINUSE',
    });
    const error = new BindError('127.0.0.1:9070', { listener: 'admin', cause });
    expect(error).toMatchObject({ code: 'RT0004', status: 500, address: '127.0.0.1:9070', listener: 'admin', cause });
    expect(error.message).toBe(
      'cannot bind the admin listener to 127.0.0.1:9070: listen EADDRINUSE: address already in use 127.0.0.1:9070',
    );
    expect(new BindError('[::1]:8080').message).toBe('cannot bind to [::1]:8080');
  });

  it('DataDirLockedError is RT0005 and says what to do', () => {
    const error = new DataDirLockedError('/srv/.ratchet', { lockFile: '/srv/.ratchet/LOCK', holderPid: 4242 });
    expect(error).toMatchObject({ code: 'RT0005', status: 500, dataDir: '/srv/.ratchet' });
    expect(error.message).toBe(
      'the data directory /srv/.ratchet is locked by another process (lock file /srv/.ratchet/LOCK, held by pid 4242); ' +
        'stop the other Ratchet using it, or point RATCHET_DATA_DIR at another directory',
    );
  });

  it('StorageVersionMismatchError is META0010', () => {
    const error = new StorageVersionMismatchError('storage format 9, this runtime reads up to 3', {
      found: 9,
      supported: 3,
    });
    expect(error).toMatchObject({ code: 'META0010', status: 500, found: 9, supported: 3 });
    expect(error.codedMessage).toBe('[META0010] storage format 9, this runtime reads up to 3');
  });

  it('StorageVersionMissingError is META0011 and mentions RT0009', () => {
    const error = new StorageVersionMissingError('the ratchet schema has no storage format version');
    expect(error).toMatchObject({ code: 'META0011', status: 500 });
    expect(error.codedMessage).toBe(
      '[META0011] the ratchet schema has no storage format version (META0011, also known as RT0009)',
    );
    expect(new StorageVersionMissingError('no version (RT0009)').message).toBe('no version (RT0009)');
  });
});
