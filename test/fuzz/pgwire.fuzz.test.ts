import { connect } from 'node:net';
import fc from 'fast-check';
import pg from 'pg';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../../runtime/src/config/config.ts';
import type { PgWireListener } from '../../runtime/src/introspection/pgwire/listener.ts';
import { startPgWireListener } from '../../runtime/src/introspection/pgwire/listener.ts';
import {
  CANCEL_REQUEST_CODE,
  GSSENC_REQUEST_CODE,
  PROTOCOL_3_0,
  SSL_REQUEST_CODE,
  Writer,
  parseErrorFields,
} from '../../runtime/src/introspection/pgwire/messages.ts';
import {
  SCRAM_SHA_256,
  SCRAM_SHA_256_PLUS,
  ScramProtocolError,
  ScramServer,
  scramVerifier,
} from '../../runtime/src/introspection/pgwire/scram.ts';
import { migrate } from '../../runtime/src/storage/pg/migrate.ts';
import { prepareIntrospection } from '../integration/pgwire/support.ts';
import { LOOPBACK } from '../support/ports.ts';
import { createTestDatabase, type TestDatabase } from '../support/postgres.ts';
import { chunked, mutatedBytes, mutatedString, nastyFragment, nastyString } from './support/arbitraries.ts';
import { PARSER_TIMEOUT, expectOwnError, fuzz, fuzzAsync, timeoutFor, watchProcessErrors } from './support/fuzz.ts';

/**
 * SQL introspection's PostgreSQL wire listener (9071) against arbitrary client bytes: startup packets (SSL, GSSENC and
 * cancel requests, every protocol version, any parameters), SASL messages, and typed messages (a simple Query and
 * the extended protocol's) that a session without password relays to PostgreSQL. Over real sockets, to listeners
 * started in process: every answer is well-framed backend messages, an ErrorResponse is never the listener's
 * internal error (XX000), nothing is logged at error level, and a real client still logs in and queries afterwards.
 * SCRAM's server side is fuzzed on its own too.
 */

const SURFACE = 'pgwire';
const CLUSTER = 'fuzz-cluster';
const PASSWORD = 'fuzz-secret';
const processErrors = watchProcessErrors();

let db: TestDatabase;
/** With a password (SCRAM-SHA-256). */
let scram: PgWireListener;
/** Without one (dev mode): a startup packet naming the cluster opens a session that relays to PostgreSQL. */
let open: PgWireListener;
const errorLogs: string[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  try {
    await migrate(client);
  } finally {
    await client.end();
  }
  const access = await prepareIntrospection(db.url);
  const logger = pino({ level: 'error' }, { write: (line: string) => void errorLogs.push(line) });
  const listener = (env: Record<string, string>) => {
    const config = loadConfig({
      env: {
        RATCHET_CLUSTER_NAME: CLUSTER,
        RATCHET_INTROSPECTION_BIND: `${LOOPBACK}:0`,
        RATCHET_INTROSPECTION_STATEMENT_TIMEOUT: '2s',
        ...env,
      },
    });
    return startPgWireListener({ config: config.introspection, clusterName: CLUSTER, access, logger });
  };
  scram = await listener({ RATCHET_INTROSPECTION_PASSWORD: PASSWORD });
  open = await listener({});
}, 120_000);

afterAll(async () => {
  await scram?.stop();
  await open?.stop();
  await db?.drop();
});

// ---- client messages ------------------------------------------------------------------------------------------------

const text = fc.oneof(fc.string({ maxLength: 12 }), nastyString(12));
const PARAMETERS = [
  'user',
  'database',
  'application_name',
  'options',
  'replication',
  'statement_timeout',
  'client_encoding',
  'DateStyle',
  '_pq_.command_protocol',
  'role',
];

const startupPacket: fc.Arbitrary<Buffer> = fc
  .tuple(
    fc.oneof(
      { weight: 6, arbitrary: fc.constant(PROTOCOL_3_0) },
      { weight: 1, arbitrary: fc.constantFrom(PROTOCOL_3_0 + 1, PROTOCOL_3_0 + 2, 2 << 16, 4 << 16, 0, -1) },
      { weight: 1, arbitrary: fc.integer() },
    ),
    fc.array(
      fc.tuple(
        fc.oneof(fc.constantFrom(...PARAMETERS), text),
        fc.oneof(fc.constantFrom(CLUSTER, 'postgres', 'true', 'database', '0', '-c x=y', ''), text),
      ),
      { maxLength: 5 },
    ),
    fc.boolean(),
  )
  .map(([code, params, withUser]) => {
    const w = new Writer().int32(code);
    if (withUser) w.cstring('user').cstring(CLUSTER);
    for (const [k, v] of params) w.cstring(k.replaceAll('\0', '')).cstring(v.replaceAll('\0', ''));
    return w.byte(0).packet();
  });

const requestPacket: fc.Arbitrary<Buffer> = fc
  .tuple(fc.constantFrom(SSL_REQUEST_CODE, GSSENC_REQUEST_CODE, CANCEL_REQUEST_CODE), fc.integer(), fc.integer())
  .map(([code, pid, secret]) => {
    const w = new Writer().int32(code);
    if (code === CANCEL_REQUEST_CODE) w.int32(pid).int32(secret);
    return w.packet();
  });

const clientFirst = mutatedString(
  fc
    .tuple(
      fc.constantFrom('n,,', 'y,,', 'p=tls-server-end-point,,', 'n,a=x,'),
      fc.string({ minLength: 1, maxLength: 24 }),
    )
    .map(([gs2, nonce]) => `${gs2}n=,r=${nonce}`),
  fc.oneof(fc.constantFrom(',', '=', 'r=', 'm=', 'n='), nastyFragment),
);
const clientFinal = mutatedString(
  fc
    .tuple(fc.string({ maxLength: 24 }), fc.uint8Array({ minLength: 32, maxLength: 32 }))
    .map(([nonce, proof]) => `c=biws,r=${nonce},p=${Buffer.from(proof).toString('base64')}`),
  fc.oneof(fc.constantFrom(',', '=', 'p=', 'c=', 'r='), nastyFragment),
);

const saslInitial: fc.Arbitrary<Buffer> = fc
  .tuple(
    fc.oneof(fc.constantFrom(SCRAM_SHA_256, SCRAM_SHA_256_PLUS, 'PLAIN'), text),
    clientFirst,
    fc.option(fc.integer()),
  )
  .map(([mechanism, first, length]) => {
    const body = Buffer.from(first, 'utf8');
    return new Writer()
      .cstring(mechanism.replaceAll('\0', ''))
      .int32(length ?? body.length)
      .bytes(body)
      .message('p');
  });
const saslResponse: fc.Arbitrary<Buffer> = clientFinal.map((f) => new Writer().bytes(Buffer.from(f)).message('p'));

const SQL = ['SELECT 1', 'SELECT * FROM sys_invocation', 'SHOW search_path', 'BEGIN', 'SET statement_timeout = 0'];
const typedMessage: fc.Arbitrary<Buffer> = fc.oneof(
  mutatedString(fc.constantFrom(...SQL)).map((q) => new Writer().cstring(q.replaceAll('\0', '')).message('Q')),
  fc
    .tuple(text, mutatedString(fc.constantFrom(...SQL)))
    .map(([name, q]) =>
      new Writer().cstring(name.replaceAll('\0', '')).cstring(q.replaceAll('\0', '')).int32(0).message('P'),
    ),
  fc.constantFrom('S', 'H', 'X').map((t) => new Writer().message(t)),
  fc
    .tuple(fc.constantFrom(...'BDECFdcfpXQPSHZ'.split('')), fc.uint8Array({ maxLength: 24 }))
    .map(([t, body]) => new Writer().bytes(Buffer.from(body)).message(t)),
);

/** `value` one time in five, null otherwise. */
function rarely<T>(value: fc.Arbitrary<T>): fc.Arbitrary<T | null> {
  return fc.oneof({ weight: 4, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: value });
}

/** What a client sends: a handshake in order (possibly cut short), then messages; damaged at the byte level. */
const clientBytes: fc.Arbitrary<Uint8Array> = mutatedBytes(
  fc
    .tuple(
      rarely(requestPacket),
      fc.option(startupPacket, { freq: 8 }),
      fc.array(fc.oneof(saslInitial, saslResponse, typedMessage), { maxLength: 4 }),
      rarely(fc.uint8Array({ maxLength: 32 })),
    )
    .map(([request, startup, messages, raw]) =>
      Buffer.concat([
        ...(request === null ? [] : [request]),
        ...(startup === null ? [] : [startup]),
        ...messages,
        ...(raw === null ? [] : [Buffer.from(raw)]),
      ]),
    ),
  3,
);

// ---- the answer ------------------------------------------------------------------------------------------------------

interface Exchange {
  readonly bytes: Buffer;
}

/** How long the listener may stay silent before the client takes it as waiting for more input. */
const QUIET_MS = 40;

/**
 * Sends `chunks`, lets the listener answer (and a session reach PostgreSQL and back) until it has been quiet for
 * QUIET_MS, then half-closes and collects what the listener writes until it closes the connection.
 */
function exchange(port: number, chunks: readonly Buffer[]): Promise<Exchange> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: LOOPBACK, port, allowHalfOpen: true });
    const received: Buffer[] = [];
    let quiet: NodeJS.Timeout | undefined;
    const rearm = (): void => {
      clearTimeout(quiet);
      quiet = setTimeout(() => socket.end(), QUIET_MS);
    };
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error('the listener neither answered nor closed within 20 s'));
    }, 20_000);
    socket.on('data', (c: Buffer) => {
      received.push(c);
      if (!socket.writableEnded) rearm();
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      clearTimeout(quiet);
      resolve({ bytes: Buffer.concat(received) });
    });
    socket.once('connect', () => {
      for (const c of chunks) socket.write(c);
      rearm();
    });
  });
}

/**
 * Checks the listener's answer: single-byte answers to SSL/GSSENC requests, then well-framed messages. The stream may
 * stop inside a message only once the relay runs (a session that ends drops what PostgreSQL still sends). No
 * ErrorResponse carries SQLSTATE XX000 (the listener's "internal error in the SQL listener").
 */
function checkAnswer(bytes: Buffer): void {
  let i = 0;
  while (i < bytes.length && (bytes[i] === 0x4e || bytes[i] === 0x53)) i++; // 'N' / 'S'
  let relaying = false;
  while (i < bytes.length) {
    if (bytes.length - i < 5) {
      if (relaying) return;
      throw new Error(`a message header cut short at ${i}: ${bytes.toString('hex')}`);
    }
    const type = String.fromCharCode(bytes[i]!);
    const length = bytes.readInt32BE(i + 1);
    if (length < 4) throw new Error(`message ${type} with length ${length}: ${bytes.toString('hex')}`);
    if (i + 1 + length > bytes.length) {
      if (relaying) return;
      throw new Error(`message ${type} cut short: ${bytes.toString('hex')}`);
    }
    const body = bytes.subarray(i + 5, i + 1 + length);
    if (type === 'R' && body.length >= 4 && body.readInt32BE(0) === 0) relaying = true;
    if (type === 'E') {
      const fields = parseErrorFields(body);
      expect(fields.get('M') ?? '').not.toBe('');
      if (fields.get('C') === 'XX000') throw new Error(`internal error answered: ${JSON.stringify([...fields])}`);
    }
    i += 1 + length;
  }
}

async function expectServing(): Promise<void> {
  const client = new pg.Client({
    host: LOOPBACK,
    port: scram.address.port,
    user: CLUSTER,
    password: PASSWORD,
    database: CLUSTER,
  });
  client.on('error', () => undefined);
  await client.connect();
  try {
    const res = await client.query<{ n: number }>('SELECT 1 AS n');
    expect(res.rows).toEqual([{ n: 1 }]);
  } finally {
    await client.end();
  }
}

// ---- properties -----------------------------------------------------------------------------------------------------

describe('SCRAM server', () => {
  it(
    'reads any client-first and client-final message or refuses it with ScramProtocolError',
    () => {
      const verifier = scramVerifier(PASSWORD, Buffer.alloc(16, 1), 16);
      fuzz(
        SURFACE,
        'scram',
        fc.property(
          fc.constantFrom(SCRAM_SHA_256, SCRAM_SHA_256_PLUS),
          fc.option(fc.uint8Array({ minLength: 32, maxLength: 32 })),
          clientFirst,
          clientFinal,
          (mechanism, binding, first, final) => {
            const server = new ScramServer(verifier, mechanism, binding === null ? undefined : Buffer.from(binding));
            try {
              server.first(first);
              server.final(final);
            } catch (err) {
              expectOwnError(err, [ScramProtocolError]);
            }
          },
        ),
        { runs: 3000 },
      );
    },
    PARSER_TIMEOUT,
  );
});

describe('the listener over a socket', () => {
  it(
    'answers any client bytes with well-framed messages or a FATAL, never an internal error, and keeps serving',
    async () => {
      let inputs = 0;
      await fuzzAsync(
        SURFACE,
        'socket',
        fc.asyncProperty(
          fc.boolean(),
          clientBytes,
          fc.array(fc.nat(), { maxLength: 3 }),
          async (withPassword, b, cuts) => {
            const listener = withPassword ? scram : open;
            const answer = await exchange(listener.address.port, chunked(b, cuts));
            checkAnswer(answer.bytes);
            if (errorLogs.length > 0)
              throw new Error(`the listener logged an error: ${errorLogs.splice(0).join('\n')}`);
            if (++inputs % 50 === 0) await expectServing();
            await processErrors.check();
          },
        ),
        { runs: 200, weight: 0.02 },
      );
      await expectServing();
      // Every session ended: none is left holding a slot or a database connection.
      await vi.waitFor(() => expect(scram.sessions + open.sessions).toBe(0), { timeout: 15_000 });
    },
    timeoutFor(200, 0.02, 60),
  );
});
