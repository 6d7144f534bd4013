import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuthenticationError } from '../../runtime/src/auth/errors.ts';
import { TokenVerifier } from '../../runtime/src/auth/verifier.ts';
import { buildIngressApp } from '../../runtime/src/ingress/app.ts';
import { mint, newKey, nowSeconds, publicPem, type TestKey } from '../integration/auth/support.ts';
import { anyJson, mutatedString, nastyFragment, nastyString } from './support/arbitraries.ts';
import { startFuzzEngine, type FuzzEngine } from './support/engine.ts';
import { expectOwnError, fuzzAsync, timeoutFor, watchProcessErrors } from './support/fuzz.ts';

/**
 * Managed mode's access tokens (admin, ingress, observability and the SQL password on 9071 all verify them with
 * `TokenVerifier`): tokens of this cluster's keys with every claim right and wrong, the same tokens damaged, forged
 * headers and payloads, and arbitrary `Authorization` headers. A token is accepted only when one of the keys signed
 * exactly its header and payload with valid claims; everything else is an AuthenticationError (401) whose message
 * never repeats the token. Through the ingress, every refusal is a 401 or 403.
 */

const SURFACE = 'jwt';
const CLUSTER = 'fuzz-cluster';
const processErrors = watchProcessErrors();

const dir = mkdtempSync(join(tmpdir(), 'ratchet-fuzz-jwt-'));
let verifier: TokenVerifier;
let fuzzEngine: FuzzEngine;
let app: FastifyInstance;

interface Minted {
  readonly token: string;
  /** Signed by a key of the keys file, with claims the verifier must accept. */
  readonly valid: boolean;
}
const minted: Minted[] = [];
/** `header.payload` of every token that must verify. */
const acceptable = new Set<string>();

beforeAll(async () => {
  const keys: TestKey[] = [newKey('ed25519'), newKey('p256'), newKey('rsa')];
  const stranger = newKey('ed25519');
  const file = join(dir, 'keys.pem');
  writeFileSync(file, keys.map(publicPem).join('\n'));
  verifier = await TokenVerifier.start({
    keysFile: file,
    clusterName: CLUSTER,
    logger: pino({ level: 'silent' }),
    pollIntervalMs: 600_000,
  });
  const now = nowSeconds();
  const claimSets: { claims: Record<string, unknown>; valid: boolean }[] = [
    { claims: { aud: CLUSTER, role: 'full', sub: 'op' }, valid: true },
    { claims: { aud: [CLUSTER, 'other'], role: 'ingress', exp: now + 3600 }, valid: true },
    { claims: { aud: CLUSTER, role: 'awakeables', nbf: now - 10 }, valid: true },
    { claims: { aud: CLUSTER, role: 'admin', exp: now - 3600 }, valid: false },
    { claims: { aud: CLUSTER, role: 'full', nbf: now + 3600 }, valid: false },
    { claims: { aud: 'other', role: 'full' }, valid: false },
    { claims: { aud: CLUSTER }, valid: false },
    { claims: { aud: CLUSTER, role: 'root' }, valid: false },
    { claims: { aud: CLUSTER, role: ['full'] }, valid: false },
    { claims: { role: 'full' }, valid: false },
    { claims: { aud: CLUSTER, role: 'full', exp: 'tomorrow' }, valid: false },
    { claims: { aud: CLUSTER, role: 'full', iat: now + 100_000 }, valid: true },
  ];
  for (const key of keys) {
    for (const { claims, valid } of claimSets) {
      minted.push({ token: await mint(key, claims, valid ? 'kid-1' : undefined), valid });
    }
  }
  for (const { claims } of claimSets.slice(0, 3)) minted.push({ token: await mint(stranger, claims), valid: false });
  for (const m of minted) if (m.valid) acceptable.add(m.token.split('.').slice(0, 2).join('.'));

  fuzzEngine = await startFuzzEngine();
  app = buildIngressApp({
    engine: fuzzEngine.engine,
    registry: fuzzEngine.registry.asSchemaRegistry(),
    logger: pino({ level: 'silent' }),
    requestSizeLimit: 64 * 1024,
    auth: verifier,
  });
  await app.ready();
});

afterAll(async () => {
  verifier?.stop();
  await app?.close();
  await fuzzEngine?.stop();
  rmSync(dir, { recursive: true, force: true });
});

// ---- inputs ---------------------------------------------------------------------------------------------------------

const b64 = (value: unknown): string =>
  Buffer.from(typeof value === 'string' ? value : (JSON.stringify(value) ?? '')).toString('base64url');

const ALGS = ['EdDSA', 'Ed25519', 'ES256', 'RS256', 'none', 'HS256', 'PS256', 'ES512', '', 'eddsa'];

/** Compact JWS forged from scratch: any header (alg, kid, crit, b64), any payload, any signature. */
const forged: fc.Arbitrary<string> = fc
  .tuple(
    fc.oneof(
      fc.record(
        {
          alg: fc.oneof(fc.constantFrom(...ALGS), anyJson),
          typ: fc.constantFrom('JWT', 'at+jwt', ''),
          kid: fc.oneof(fc.constant('kid-1'), anyJson),
          crit: fc.oneof(fc.constant(['b64']), anyJson),
          b64: fc.boolean(),
          jwk: anyJson,
        },
        { requiredKeys: ['alg'] },
      ),
      anyJson,
    ),
    fc.oneof(
      fc.record(
        {
          aud: fc.oneof(fc.constant(CLUSTER), anyJson),
          role: fc.oneof(fc.constantFrom('full', 'admin', 'ingress'), anyJson),
          exp: fc.oneof(fc.integer(), anyJson),
          nbf: fc.oneof(fc.integer(), anyJson),
        },
        { requiredKeys: [] },
      ),
      anyJson,
    ),
    fc.oneof(
      fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b).toString('base64url')),
      nastyString(12),
    ),
  )
  .map(([h, p, sig]) => `${b64(h)}.${b64(p)}.${sig}`);

const b64urlChar = fc.constantFrom(...'ABCXYZabcxyz0189-_=+/.'.split(''));

/** A minted token, whole or damaged (characters, segments swapped between tokens), a forged one, or any text. */
const token: fc.Arbitrary<string> = fc.oneof(
  { weight: 2, arbitrary: fc.nat().map((i) => minted[i % minted.length]!.token) },
  {
    weight: 4,
    arbitrary: mutatedString(
      fc.nat().map((i) => minted[i % minted.length]!.token),
      fc.oneof(b64urlChar, nastyFragment, fc.string({ maxLength: 3 })),
    ),
  },
  {
    weight: 1,
    arbitrary: fc.tuple(fc.nat(), fc.nat(), fc.nat()).map(([a, b, c]) => {
      const part = (i: number, n: number): string => minted[i % minted.length]!.token.split('.')[n]!;
      return `${part(a, 0)}.${part(b, 1)}.${part(c, 2)}`;
    }),
  },
  { weight: 2, arbitrary: forged },
  { weight: 1, arbitrary: nastyString(60) },
);

const authorization: fc.Arbitrary<string> = fc.oneof(
  token.map((t) => `Bearer ${t}`),
  fc
    .tuple(fc.constantFrom('Bearer', 'bearer', 'BEARER', 'Basic', 'Token', '', 'Bearer\t', 'Bearer  '), token)
    .map(([scheme, t]) => `${scheme} ${t}`),
  fc.tuple(token, fc.constantFrom(' ', '  ', ' x', ',', '\t')).map(([t, tail]) => `Bearer ${t}${tail}`),
  nastyString(20),
);

// ---- checks ---------------------------------------------------------------------------------------------------------

function expectRefusal(err: unknown, t: string | undefined): void {
  expectOwnError(err, [AuthenticationError]);
  expect((err as AuthenticationError).status).toBe(401);
  // The message never carries the token (tokens are credentials; messages reach logs).
  if (t !== undefined && t.length >= 16) expect((err as Error).message).not.toContain(t);
}

function mustBeAcceptable(t: string): void {
  if (!acceptable.has(t.split('.').slice(0, 2).join('.'))) {
    throw new Error(`a token that no key signed with valid claims was accepted: ${t}`);
  }
}

// ---- properties -----------------------------------------------------------------------------------------------------

describe('access tokens', () => {
  it(
    'accepts exactly the tokens a key signed with valid claims, refusing the rest with a 401',
    async () => {
      await fuzzAsync(
        SURFACE,
        'verify',
        fc.asyncProperty(token, async (t) => {
          try {
            await verifier.verify(t);
            mustBeAcceptable(t);
          } catch (err) {
            if (err instanceof Error && err.message.startsWith('a token that no key signed')) throw err;
            expectRefusal(err, t);
          }
          await processErrors.check();
        }),
        { runs: 1500, weight: 0.5 },
      );
    },
    timeoutFor(1500, 0.5, 3),
  );

  it(
    'reads any Authorization header: a valid bearer token or a 401',
    async () => {
      await fuzzAsync(
        SURFACE,
        'authenticate',
        fc.asyncProperty(fc.option(authorization, { freq: 10 }), async (header) => {
          try {
            await verifier.authenticate(header ?? undefined);
            mustBeAcceptable(/^Bearer +(\S+) *$/i.exec(header ?? '')?.[1] ?? '');
          } catch (err) {
            if (err instanceof Error && err.message.startsWith('a token that no key signed')) throw err;
            expectRefusal(err, /^Bearer +(\S+)/i.exec(header ?? '')?.[1]);
          }
          await processErrors.check();
        }),
        { runs: 1500, weight: 0.5 },
      );
    },
    timeoutFor(1500, 0.5, 3),
  );

  it(
    'answers ingress requests carrying any Authorization header with the call, a 401 or a 403',
    async () => {
      const PATHS = ['/Greeter/greet', '/restate/health', '/restate/awakeables/sign_1x/resolve', '/Counter/k/get'];
      await fuzzAsync(
        SURFACE,
        'ingress-inject',
        fc.asyncProperty(fc.constantFrom(...PATHS), fc.option(authorization, { freq: 10 }), async (path, header) => {
          // Node refuses to send header values with CR, LF or NUL: no client can.
          if (header !== null && /[\r\n\0]/.test(header)) return;
          const res = await app.inject({
            method: 'POST',
            url: path,
            headers: header === null ? {} : { authorization: header },
          });
          if (res.statusCode === 401 || res.statusCode === 403) {
            expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
            expect((JSON.parse(res.body) as { message: string }).message).not.toBe('');
          } else {
            expect(res.statusCode).toBeLessThan(500);
            mustBeAcceptable(/^Bearer +(\S+) *$/i.exec(header ?? '')?.[1] ?? '');
          }
          await processErrors.check();
        }),
        { runs: 600, weight: 0.2 },
      );
    },
    timeoutFor(600, 0.2, 5),
  );
});
