import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../../runtime/src/errors/config-errors.ts';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { startTestRuntime, type TestRuntime } from '../support/runtime.ts';
import { expectAdminRefusal, expectIngressRefusal, mint, newKey, privatePem, publicPem, send } from './support.ts';

/**
 * The keys file over time. It sits in a Kubernetes Secret volume layout (`keys.pem` → `..data/keys.pem`, `..data` →
 * a generation directory, swapped atomically the way the kubelet updates a Secret), and keys are rotated under a
 * running runtime: a new key works without a restart, a removed key stops working. Also: PEM private keys (their
 * public half), the `npm run token` command, and startup without a usable file.
 */

const CLUSTER = 'auth-rotation';
const REPO = fileURLToPath(new URL('../../../', import.meta.url));

const a = newKey('ed25519');
const b = newKey('p256');

let dir: string;
let secret: string;
let keysFile: string;
let db: TestDatabase;
let runtime: TestRuntime;

let generation = 0;
/** Publishes `content` as the Secret's `keys.pem` the way the kubelet does: a new directory, then a symlink swap. */
function publish(content: string): void {
  const previous = generation === 0 ? undefined : join(secret, `..gen_${generation}`);
  generation++;
  const next = join(secret, `..gen_${generation}`);
  mkdirSync(next);
  writeFileSync(join(next, 'keys.pem'), content);
  symlinkSync(`..gen_${generation}`, join(secret, '..data_tmp'));
  renameSync(join(secret, '..data_tmp'), join(secret, '..data'));
  if (!existsSync(keysFile)) symlinkSync('..data/keys.pem', keysFile);
  if (previous !== undefined) rmSync(previous, { recursive: true });
}

const deployments = (token: string): ReturnType<typeof send> =>
  send('GET', `${runtime.adminUrl}/deployments`, { token });

/** Waits until the runtime answers `status` to `token` (the keys file is re-read on change, or within 10 s). */
async function eventually(token: string, status: number): Promise<void> {
  await expect.poll(async () => (await deployments(token)).status, { timeout: 20_000, interval: 100 }).toBe(status);
}

interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** `npm run token -- …args`, as its script runs it. */
function tokenCommand(...args: string[]): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', 'runtime/src/auth/cli.ts', ...args],
      { cwd: REPO, timeout: 60_000 },
      (err, stdout, stderr) => {
        resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, stdout, stderr });
      },
    );
  });
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ratchet-auth-rotation-'));
  secret = join(dir, 'secret');
  mkdirSync(secret);
  keysFile = join(secret, 'keys.pem');
  // A PKCS#8 private key: the runtime uses its public half.
  publish(privatePem(a));
  db = await createTestDatabase();
  runtime = await startTestRuntime(db.url, { RATCHET_CLUSTER_NAME: CLUSTER, RATCHET_AUTH_KEYS_FILE: keysFile });
});

afterAll(async () => {
  await runtime?.stop();
  await db?.drop();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

describe('key rotation', () => {
  it('verifies with the public half of a PEM private key, and refuses other keys', async () => {
    expect((await deployments(await mint(a, { aud: CLUSTER, role: 'admin' }))).status).toBe(200);
    expectAdminRefusal(
      await deployments(await mint(b, { aud: CLUSTER, role: 'admin' })),
      401,
      /signature does not verify under any key of this cluster/,
    );
  });

  it('accepts a new key without a restart, and stops accepting a removed one', async () => {
    const byA = await mint(a, { aud: CLUSTER, role: 'full' });
    const byB = await mint(b, { aud: CLUSTER, role: 'full' });
    expect((await deployments(byA)).status).toBe(200);

    // Both keys: the operator adds the next key before it signs with it.
    publish(`${publicPem(a)}${publicPem(b)}`);
    await eventually(byB, 200);
    expect((await deployments(byA)).status).toBe(200);

    // Then the old key goes: its tokens (cached as verified a moment ago) stop working.
    publish(publicPem(b));
    await eventually(byA, 401);
    expectAdminRefusal(await deployments(byA), 401, /signature does not verify under any key/);
    expectIngressRefusal(
      await send('POST', `${runtime.ingressUrl}/Greeter/greet`, { token: byA, body: 'x' }),
      401,
      /signature does not verify/,
    );
    expect((await deployments(byB)).status).toBe(200);
  });

  it('accepts what `npm run token` makes, from a key made by `npm run token -- --generate-key`', async () => {
    const keyPath = join(dir, 'generated.pem');
    const generated = await tokenCommand('--generate-key', keyPath);
    expect(generated.code, generated.stderr).toBe(0);
    expect(statSync(keyPath).mode & 0o777).toBe(0o600);
    expect(readFileSync(keyPath, 'utf8')).toMatch(/^-----BEGIN PRIVATE KEY-----\n/);
    expect(generated.stdout).toMatch(/^-----BEGIN PUBLIC KEY-----\n[\s\S]+-----END PUBLIC KEY-----\n$/);
    // Never over an existing key.
    expect((await tokenCommand('--generate-key', keyPath)).code).toBe(1);

    const made = await tokenCommand('--key', keyPath, '--cluster', CLUSTER, '--role', 'admin', '--expires', '30d');
    expect(made.code, made.stderr).toBe(0);
    const token = made.stdout.trim();
    expect(token).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/);
    const claims = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as Record<string, number>;
    expect(claims['exp']! - claims['iat']!).toBe(30 * 24 * 3600);

    expectAdminRefusal(await deployments(token), 401, /signature does not verify/);
    // The public key it printed is all the runtime needs.
    publish(`${publicPem(b)}${generated.stdout}`);
    await eventually(token, 200);
    expectIngressRefusal(
      await send('POST', `${runtime.ingressUrl}/Greeter/greet`, { token, body: 'x' }),
      403,
      /role 'admin' does not allow this ingress request/,
    );

    const bad = await tokenCommand('--key', keyPath, '--cluster', CLUSTER, '--role', 'root');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--role: expected one of full, admin, ingress, awakeables/);
  });
});

describe('startup', () => {
  async function startupError(file: string): Promise<ConfigError> {
    const err = await startTestRuntime(db.url, { RATCHET_CLUSTER_NAME: CLUSTER, RATCHET_AUTH_KEYS_FILE: file }).then(
      async (started) => {
        await started.stop();
        return undefined;
      },
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).code).toBe('RT0002');
    return err as ConfigError;
  }

  it('refuses to start in managed mode without a usable keys file (RT0002 naming RATCHET_AUTH_KEYS_FILE)', async () => {
    const missing = await startupError(join(dir, 'absent.pem'));
    expect(missing.message).toMatch(/^invalid value for RATCHET_AUTH_KEYS_FILE: cannot read .*absent\.pem: ENOENT/);
    const garbage = join(dir, 'garbage.pem');
    writeFileSync(garbage, 'not a key');
    expect((await startupError(garbage)).message).toMatch(
      /^invalid value for RATCHET_AUTH_KEYS_FILE: .*garbage\.pem: expected a JWKS document/,
    );
    const empty = join(dir, 'empty.json');
    writeFileSync(empty, '{"keys": []}');
    expect((await startupError(empty)).message).toMatch(/RATCHET_AUTH_KEYS_FILE: .*holds no keys/);
  });
});
