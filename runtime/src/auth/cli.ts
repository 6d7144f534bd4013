import { generateKeyPairSync } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { SignJWT } from 'jose';
import { CLUSTER_NAME_PATTERN } from '../config/config.ts';
import { parseDuration, UnitFormatError } from '../config/units.ts';
import { KeyFileError, parseSigningKey } from './keys.ts';
import { ROLES, isRole } from './roles.ts';

/*
 * `npm run token`: access tokens for people who run Ratchet in managed mode without the operator.
 *
 *   npm run token -- --generate-key <file>      writes a new Ed25519 private key (PKCS#8 PEM, mode 0600) and prints
 *                                               its public key (SPKI PEM) on stdout
 *   npm run token -- --key <private.pem> --cluster <name> --role <role> [--expires 30d] [--subject <sub>]
 *                                               prints a token signed with the key
 *
 * The runtime takes either PEM as RATCHET_AUTH_KEYS_FILE (of a private key it uses the public half).
 */

const USAGE = `usage:
  npm run token -- --generate-key <file>
  npm run token -- --key <private.pem> --cluster <name> --role <${ROLES.join('|')}> [--expires <duration>] [--subject <sub>]`;

class UsageError extends Error {}

async function main(argv: readonly string[]): Promise<string> {
  let values;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: {
        'generate-key': { type: 'string' },
        key: { type: 'string' },
        cluster: { type: 'string' },
        role: { type: 'string' },
        expires: { type: 'string' },
        subject: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  if (values.help === true) return USAGE;

  const generate = values['generate-key'];
  if (generate !== undefined) {
    if (values.key !== undefined || values.role !== undefined) {
      throw new UsageError('--generate-key takes no other option');
    }
    const { privateKey, publicKey } = generateKeyPairSync('ed25519');
    const pem = privateKey.export({ format: 'pem', type: 'pkcs8' }) as string;
    try {
      // Never over an existing key: tokens signed with it would all stop working.
      await writeFile(generate, pem, { mode: 0o600, flag: 'wx' });
    } catch (err) {
      throw new Error(`cannot write ${generate}: ${(err as Error).message}`);
    }
    process.stderr.write(
      `wrote a new Ed25519 private key to ${generate}; its public key follows. Give either file to the runtime as ` +
        `RATCHET_AUTH_KEYS_FILE and sign tokens with: npm run token -- --key ${generate} --cluster <name> --role full\n`,
    );
    return (publicKey.export({ format: 'pem', type: 'spki' }) as string).trimEnd();
  }

  const { key: keyPath, cluster, role } = values;
  if (keyPath === undefined || cluster === undefined || role === undefined) {
    throw new UsageError('--key, --cluster and --role are required');
  }
  if (!CLUSTER_NAME_PATTERN.test(cluster)) {
    throw new UsageError(`--cluster: '${cluster}' is not a cluster name (a lowercase DNS label)`);
  }
  if (!isRole(role)) throw new UsageError(`--role: expected one of ${ROLES.join(', ')}`);
  let expiresInSeconds: number | undefined;
  if (values.expires !== undefined) {
    try {
      expiresInSeconds = Math.ceil(parseDuration(values.expires) / 1000);
    } catch (err) {
      if (err instanceof UnitFormatError) throw new UsageError(`--expires: ${err.message}`);
      throw err;
    }
    if (expiresInSeconds <= 0) throw new UsageError('--expires: must be longer than 0s');
  }

  let text: string;
  try {
    text = await readFile(keyPath, 'utf8');
  } catch (err) {
    throw new Error(`cannot read ${keyPath}: ${(err as Error).message}`);
  }
  let signing;
  try {
    signing = parseSigningKey(text);
  } catch (err) {
    if (err instanceof KeyFileError) throw new Error(`${keyPath}: ${err.message}`);
    throw err;
  }
  const now = Math.floor(Date.now() / 1000);
  const jwt = new SignJWT({ role })
    .setProtectedHeader({ alg: signing.alg, typ: 'JWT' })
    .setAudience(cluster)
    .setIssuedAt(now);
  if (expiresInSeconds !== undefined) jwt.setExpirationTime(now + expiresInSeconds);
  if (values.subject !== undefined) jwt.setSubject(values.subject);
  return jwt.sign(signing.key);
}

main(process.argv.slice(2)).then(
  (out) => {
    process.stdout.write(`${out}\n`);
  },
  (err: unknown) => {
    const usage = err instanceof UsageError;
    process.stderr.write(`ratchet token: ${(err as Error).message}\n${usage ? `${USAGE}\n` : ''}`);
    process.exitCode = usage ? 2 : 1;
  },
);
