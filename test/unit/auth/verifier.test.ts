import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SignJWT, UnsecuredJWT } from 'jose';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { AuthenticationError, PermissionDeniedError } from '../../../runtime/src/auth/errors.ts';
import { authorize, TokenVerifier } from '../../../runtime/src/auth/verifier.ts';
import { loadConfig } from '../../../runtime/src/config/config.ts';
import { ConfigError } from '../../../runtime/src/errors/config-errors.ts';
import { createLogger } from '../../../runtime/src/telemetry/logger.ts';

/**
 * The verifier on its own: claims, clock skew, header forms, reloads; a keys file in a temporary directory. The
 * listeners' answers are tested in test/integration/auth.
 */

const dir = mkdtempSync(join(tmpdir(), 'ratchet-auth-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const CLUSTER = 'unit-cluster';
const logLines: Record<string, unknown>[] = [];
const logger = createLogger(
  { level: 'info' },
  { destination: { write: (line: string) => void logLines.push(JSON.parse(line) as Record<string, unknown>) } },
);

let counter = 0;
const started: TokenVerifier[] = [];
afterEach(() => {
  for (const v of started.splice(0)) v.stop();
});

function pem(k: KeyObject): string {
  return k.export({ format: 'pem', type: 'spki' }) as string;
}

async function verifierFor(text: string): Promise<{ verifier: TokenVerifier; file: string }> {
  const file = join(dir, `keys-${counter++}.pem`);
  writeFileSync(file, text);
  // A long poll: the tests reload explicitly.
  const verifier = await TokenVerifier.start({ keysFile: file, clusterName: CLUSTER, logger, pollIntervalMs: 600_000 });
  started.push(verifier);
  return { verifier, file };
}

const now = (): number => Math.floor(Date.now() / 1000);

function sign(key: KeyObject, claims: Record<string, unknown>, header: Record<string, unknown> = {}): Promise<string> {
  return new SignJWT(claims).setProtectedHeader({ alg: 'EdDSA', ...header }).sign(key);
}

async function refusal(promise: Promise<unknown>): Promise<AuthenticationError> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(AuthenticationError);
    return err as AuthenticationError;
  }
  throw new Error('expected the token to be refused');
}

describe('TokenVerifier', () => {
  const a = generateKeyPairSync('ed25519');
  const b = generateKeyPairSync('ed25519');

  it('accepts aud as a string or a list containing the cluster, and returns role and subject', async () => {
    const { verifier } = await verifierFor(pem(a.publicKey));
    expect(await verifier.verify(await sign(a.privateKey, { aud: CLUSTER, role: 'admin', sub: 'ops' }))).toEqual({
      role: 'admin',
      subject: 'ops',
    });
    const listed = await sign(a.privateKey, { aud: ['other', CLUSTER], role: 'awakeables' });
    expect(await verifier.authenticate(`Bearer ${listed}`)).toEqual({ role: 'awakeables', subject: undefined });
    expect(await verifier.authenticate(`bearer   ${listed}`)).toEqual({ role: 'awakeables', subject: undefined });
    expect((await refusal(verifier.verify(await sign(a.privateKey, { aud: ['other'], role: 'full' })))).reason).toBe(
      'wrong-audience',
    );
    expect((await refusal(verifier.verify(await sign(a.privateKey, { role: 'full' })))).reason).toBe('wrong-audience');
  });

  it('allows 30 s of clock skew on exp and nbf, no more', async () => {
    const { verifier } = await verifierFor(pem(a.publicKey));
    const claims = { aud: CLUSTER, role: 'full' };
    await verifier.verify(await sign(a.privateKey, { ...claims, exp: now() - 10 }));
    await verifier.verify(await sign(a.privateKey, { ...claims, nbf: now() + 10 }));
    expect((await refusal(verifier.verify(await sign(a.privateKey, { ...claims, exp: now() - 60 })))).reason).toBe(
      'expired',
    );
    expect((await refusal(verifier.verify(await sign(a.privateKey, { ...claims, nbf: now() + 60 })))).reason).toBe(
      'not-yet-valid',
    );
    expect((await refusal(verifier.verify(await sign(a.privateKey, { ...claims, exp: 'tomorrow' })))).message).toMatch(
      /claims are invalid/,
    );
  });

  it('refuses unsigned tokens, other algorithms, and malformed headers', async () => {
    const { verifier } = await verifierFor(pem(a.publicKey));
    const unsigned = new UnsecuredJWT({ aud: CLUSTER, role: 'full' }).encode();
    expect((await refusal(verifier.verify(unsigned))).reason).toBe('unsupported-algorithm');
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const rs256 = await new SignJWT({ aud: CLUSTER, role: 'full' })
      .setProtectedHeader({ alg: 'RS256' })
      .sign(rsa.privateKey);
    // An algorithm of the contract that no key of the file uses: a key this cluster does not have.
    expect((await refusal(verifier.verify(rs256))).reason).toBe('bad-signature');
    // HMAC with the public key as the secret: the classic confusion attack.
    const hs256 = await new SignJWT({ aud: CLUSTER, role: 'full' })
      .setProtectedHeader({ alg: 'HS256' })
      .sign(new TextEncoder().encode(pem(a.publicKey)));
    expect((await refusal(verifier.verify(hs256))).message).toBe(
      "the token's algorithm HS256 is not accepted (supported: EdDSA, ES256, RS256)",
    );
    expect((await refusal(verifier.authenticate(undefined))).reason).toBe('missing');
    expect((await refusal(verifier.authenticate(''))).reason).toBe('missing');
    expect((await refusal(verifier.authenticate('Basic dXNlcjpwYXNz'))).message).toMatch(/expected 'Bearer <token>'/);
    expect((await refusal(verifier.authenticate('Bearer'))).reason).toBe('malformed');
    expect((await refusal(verifier.authenticate('Bearer a.b'))).reason).toBe('malformed');
    expect((await refusal(verifier.authenticate('Bearer !!.??.**'))).reason).toBe('malformed');
  });

  it('tries every key: a kid naming none of them does not stop another from verifying', async () => {
    const { verifier } = await verifierFor(`${pem(b.publicKey)}${pem(a.publicKey)}`);
    const token = await sign(a.privateKey, { aud: CLUSTER, role: 'ingress' }, { kid: 'unknown' });
    expect((await verifier.verify(token)).role).toBe('ingress');
    const stranger = generateKeyPairSync('ed25519');
    expect(
      (await refusal(verifier.verify(await sign(stranger.privateKey, { aud: CLUSTER, role: 'full' })))).reason,
    ).toBe('bad-signature');
  });

  it('refuses a missing, empty or unknown role', async () => {
    const { verifier } = await verifierFor(pem(a.publicKey));
    for (const role of [undefined, null, '', 'root', 'FULL', ['full']]) {
      const token = await sign(a.privateKey, role === undefined ? { aud: CLUSTER } : { aud: CLUSTER, role });
      expect((await refusal(verifier.verify(token))).reason).toBe(
        role === undefined || role === null ? 'missing-role' : 'unknown-role',
      );
    }
  });

  it('follows a reload: new keys verify, removed keys stop at once (cached results too); a broken file changes nothing', async () => {
    const { verifier, file } = await verifierFor(pem(a.publicKey));
    const byA = await sign(a.privateKey, { aud: CLUSTER, role: 'full' });
    const byB = await sign(b.privateKey, { aud: CLUSTER, role: 'full' });
    await verifier.verify(byA); // now cached
    expect((await refusal(verifier.verify(byB))).reason).toBe('bad-signature');

    writeFileSync(file, `${pem(a.publicKey)}${pem(b.publicKey)}`);
    await verifier.reloadKeys();
    await verifier.verify(byB);

    writeFileSync(file, pem(b.publicKey));
    await verifier.reloadKeys();
    expect((await refusal(verifier.verify(byA))).reason).toBe('bad-signature');

    logLines.length = 0;
    writeFileSync(file, 'not keys');
    await verifier.reloadKeys();
    await verifier.reloadKeys();
    await verifier.verify(byB);
    const warnings = logLines.filter((l) => l['level'] === 'warn');
    // Once, not at every poll.
    expect(warnings).toHaveLength(1);
    expect(String(warnings[0]!['msg'])).toMatch(/the keys file is not valid: .*keeping the previous keys/);

    rmSync(file);
    await verifier.reloadKeys();
    await verifier.verify(byB);
    expect(logLines.filter((l) => l['level'] === 'warn').map((l) => String(l['msg']))[1]).toMatch(
      /cannot read the keys file: ENOENT/,
    );
  });

  it('makes a missing or invalid file at startup RT0002 naming RATCHET_AUTH_KEYS_FILE', async () => {
    for (const start of [
      () => TokenVerifier.start({ keysFile: join(dir, 'absent.pem'), clusterName: CLUSTER, logger }),
      () => verifierFor('{"keys": []}'),
    ]) {
      const err = await start().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).code).toBe('RT0002');
      expect((err as ConfigError).message).toMatch(/^invalid value for RATCHET_AUTH_KEYS_FILE: /);
    }
  });
});

describe('roles', () => {
  it('open what the contract says, and nothing else', () => {
    const table = {
      full: ['admin', 'ingress', 'awakeable-completion', 'introspection'],
      admin: ['admin', 'introspection'],
      ingress: ['ingress', 'awakeable-completion'],
      awakeables: ['awakeable-completion'],
    } as const;
    for (const [role, allowed] of Object.entries(table)) {
      for (const access of ['admin', 'ingress', 'awakeable-completion', 'introspection'] as const) {
        const check = (): void => authorize({ role: role as keyof typeof table, subject: undefined }, access);
        if ((allowed as readonly string[]).includes(access)) expect(check).not.toThrow();
        else expect(check).toThrow(PermissionDeniedError);
      }
    }
  });
});

describe('configuration', () => {
  it('reads RATCHET_AUTH_KEYS_FILE or auth.keys-file, relative to the working directory; unset = dev mode', () => {
    expect(loadConfig({ env: {}, cwd: dir }).auth.keysFile).toBeUndefined();
    expect(loadConfig({ env: { RATCHET_AUTH_KEYS_FILE: 'keys/jwks.json' }, cwd: dir }).auth.keysFile).toBe(
      join(dir, 'keys/jwks.json'),
    );
    const toml = join(dir, 'ratchet.toml');
    writeFileSync(toml, '[auth]\nkeys-file = "/etc/ratchet/keys.pem"\n');
    expect(loadConfig({ env: {}, cwd: dir, configFile: toml }).auth.keysFile).toBe('/etc/ratchet/keys.pem');
    writeFileSync(toml, '[auth]\nkeys-file = 7\n');
    expect(() => loadConfig({ env: {}, cwd: dir, configFile: toml })).toThrow(
      /invalid value for auth.keys-file in .*: expected a file path, got 7/,
    );
    writeFileSync(toml, '[auth]\nkeys-file = ""\n');
    expect(() => loadConfig({ env: {}, cwd: dir, configFile: toml })).toThrow(/auth.keys-file.*expected a file path/);
  });
});
