import { tableFromIPC, type Table } from 'apache-arrow';
import { afterAll, describe, expect, it } from 'vitest';
import { cliStatements, type CliStatement } from '../integration/introspection/cli-statements.ts';
import {
  LAB_SERVICES,
  playLab,
  releaseLab,
  waitForStatus,
  type LabInvocations,
  type LabTarget,
} from '../integration/introspection/lab.ts';
import { createTestDatabase } from '../support/postgres.ts';
import { startRestateServer } from '../support/restate-server.ts';
import { registerEndpoint } from '../support/registration.ts';
import { startEndpoint } from '../support/sdk-endpoint.ts';
import { selectedTargets, type TargetName } from './targets.ts';

/**
 * `POST /query` compatibility: the lab scenario (test/integration/introspection/lab.ts) played on restate-server
 * 1.7.12 and on Ratchet, then the 35 statements of the restate CLI sent to both. Compared: the HTTP status and
 * content type, and the shape of each answer — for JSON, which columns each row has and the JSON type of each value
 * (rows as a multiset: ids and times differ); for Arrow, the schema (names, Arrow types, nullability) and the row
 * count. Values themselves are the integration tests' business (query.test.ts).
 *
 * Known differences, applied only where listed in DIFFERENCES.
 */

interface Difference {
  /** JSON columns left out of the comparison. */
  readonly columns?: readonly string[];
  /** JSON: compare the distinct row shapes only (the row counts differ). */
  readonly distinct?: boolean;
  /** Arrow: compare column types and the row count only (not names and nullability). */
  readonly typesOnly?: boolean;
  readonly why: string;
}

const ENTRY_JSON: Difference = {
  columns: ['entry_json'],
  why:
    'restate renders each journal entry as serde JSON of its internal types; Ratchet leaves entry_json NULL (the ' +
    'CLI then prints the entry type, name and timestamps only)',
};

/**
 * Ratchet pins an invocation's deployment when its first attempt starts; restate once the attempt stores a journal
 * entry. An invocation that failed before journaling anything (Flaky/boom, paused) has a pinned deployment on
 * Ratchet only.
 */
const PINNED_AT_FIRST_ATTEMPT: Difference = {
  columns: ['pinned_deployment_id'],
  why: 'Ratchet pins the deployment at the first attempt, restate at the first journaled command',
};

/** Names of unaliased expressions: DataFusion `count(Int64(1))` / `count(*)`, PostgreSQL `count`. */
const EXPRESSION_NAMES: Difference = {
  typesOnly: true,
  why: 'unaliased expressions are named by the engine (the CLI reads column 0 and ignores the name)',
};

const DIFFERENCES: Record<string, Difference> = {
  Q5: EXPRESSION_NAMES,
  Q7: PINNED_AT_FIRST_ATTEMPT,
  Q8: EXPRESSION_NAMES,
  Q10: PINNED_AT_FIRST_ATTEMPT,
  Q12: PINNED_AT_FIRST_ATTEMPT,
  Q13: EXPRESSION_NAMES,
  Q14: EXPRESSION_NAMES,
  Q15: ENTRY_JSON,
  Q27: EXPRESSION_NAMES,
  // Grouped by handler of non-completed invocations pinned to the deployment: Flaky/boom only on Ratchet.
  Q35: { ...PINNED_AT_FIRST_ATTEMPT, distinct: true },
};

/**
 * Ratchet keeps the failure that paused an invocation in sys_invocation_state (restate forgets it until the next
 * attempt): the detail queries of a paused invocation have these columns on Ratchet only.
 */
const PAUSED_EXTRAS = [
  'num_retries',
  'last_failure_message',
  'last_attempt_deployment_id',
  'last_attempt_server',
  'last_start_at',
];

interface Answer {
  readonly status: number;
  readonly contentType: string | null;
  readonly shape: unknown;
}

interface Played {
  readonly lab: LabInvocations;
  readonly answers: Map<string, Answer>;
}

function jsonType(value: unknown): string {
  if (Array.isArray(value)) return `array<${[...new Set(value.map(jsonType))].sort().join('|')}>`;
  return value === null ? 'null' : typeof value;
}

function jsonShape(rows: Record<string, unknown>[], skip: readonly string[], paused: string): string[] {
  return rows
    .map((row) => {
      const isPaused = Object.values(row).includes(paused);
      return Object.entries(row)
        .filter(([k]) => !skip.includes(k) && !(isPaused && PAUSED_EXTRAS.includes(k)))
        .map(([k, v]) => `${k}:${jsonType(v)}`)
        .sort()
        .join(',');
    })
    .sort();
}

function arrowShape(table: Table, typesOnly: boolean): unknown {
  return {
    fields: table.schema.fields.map((f) =>
      typesOnly ? String(f.type) : `${f.name}:${String(f.type)}:${f.nullable ? 'null' : 'not null'}`,
    ),
    rows: table.numRows,
  };
}

async function run(adminUrl: string, s: CliStatement, paused: string): Promise<Answer> {
  const res = await fetch(`${adminUrl}/query`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: s.accept === 'json' ? 'application/json' : '*/*' },
    body: JSON.stringify({ query: s.sql }),
  });
  const body = Buffer.from(await res.arrayBuffer());
  const contentType = res.headers.get('content-type');
  if (res.status !== 200) return { status: res.status, contentType, shape: body.toString() };
  const difference = DIFFERENCES[s.name];
  let shape: unknown;
  if (s.accept === 'json') {
    const rows = (JSON.parse(body.toString()) as { rows: Record<string, unknown>[] }).rows;
    const shapes = jsonShape(rows, difference?.columns ?? [], paused);
    shape = difference?.distinct === true ? [...new Set(shapes)] : shapes;
  } else {
    shape = arrowShape(tableFromIPC(body), difference?.typesOnly === true);
  }
  return { status: res.status, contentType, shape };
}

/** Plays the lab on `target`, waits for the states the statements look at, and runs the 35 statements. */
async function play(target: LabTarget, deploymentId: string): Promise<Played> {
  const lab = await playLab(target);
  await waitForStatus(target, lab.sleeping, 'suspended');
  await waitForStatus(target, lab.workflow, 'suspended');
  await waitForStatus(target, lab.holding, 'suspended');
  const statements = cliStatements({
    paused: lab.paused,
    sleeping: lab.sleeping,
    all: Object.values(lab),
    deploymentId,
  });
  const answers = new Map<string, Answer>();
  for (const s of statements) answers.set(s.name, await run(target.adminUrl, s, lab.paused));
  await releaseLab(target);
  return { lab, answers };
}

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
});

async function playOn(name: TargetName): Promise<Played> {
  const endpoint = await startEndpoint({ services: LAB_SERVICES, transport: 'h2' });
  cleanups.push(() => endpoint.close());
  if (name === 'restate') {
    const server = await startRestateServer({ config: { worker: { invoker: { 'inactivity-timeout': '1s' } } } });
    cleanups.push(() => server.stop());
    const { id } = await registerEndpoint(server, endpoint, { timeoutMs: 60_000 });
    return play({ ingressUrl: server.ingressUrl, adminUrl: server.adminUrl }, id);
  }
  const { startTestRuntime } = await import('../integration/support/runtime.ts');
  const db = await createTestDatabase();
  cleanups.push(() => db.drop());
  // restate-server runs without a tracing endpoint, so its invocations have no trace id: Ratchet without its trace
  // store is the same configuration.
  const runtime = await startTestRuntime(db.url, {
    RATCHET_INVOKER_INACTIVITY_TIMEOUT: '1s',
    RATCHET_OBSERVABILITY_STORE: 'off',
  });
  cleanups.push(() => runtime.stop());
  const { id } = await registerEndpoint(runtime, endpoint, { timeoutMs: 60_000 });
  return play({ ingressUrl: runtime.ingressUrl, adminUrl: runtime.adminUrl }, id);
}

describe('POST /query: the restate CLI statements on restate-server 1.7.12 and Ratchet', () => {
  const targets = selectedTargets();
  const played = new Map<TargetName, Played>();

  it.each(targets)('%s answers all 35 statements with 200 and the content type asked for', async (name) => {
    const result = await playOn(name);
    played.set(name, result);
    for (const [statement, answer] of result.answers) {
      expect(answer.status, `${statement}: ${String(answer.shape)}`).toBe(200);
      const json =
        cliStatements({ paused: '', sleeping: '', all: [], deploymentId: '' }).find((s) => s.name === statement)
          ?.accept === 'json';
      expect(answer.contentType, statement).toBe(json ? 'application/json' : 'application/vnd.apache.arrow.stream');
    }
  });

  it.runIf(targets.length === 2)('Ratchet answers with the shapes and types restate-server does', () => {
    const restate = played.get('restate');
    const ratchet = played.get('ratchet');
    expect(restate, 'the restate run').toBeDefined();
    expect(ratchet, 'the Ratchet run').toBeDefined();
    const mismatches: string[] = [];
    for (const [statement, expected] of restate!.answers) {
      const actual = ratchet!.answers.get(statement);
      try {
        expect(actual?.shape).toEqual(expected.shape);
      } catch (err) {
        mismatches.push(
          `${statement} (${(err as Error).message.split('\n')[0]}):\n  restate: ${JSON.stringify(expected.shape)}\n  ratchet: ${JSON.stringify(actual?.shape)}`,
        );
      }
    }
    if (mismatches.length > 0) expect.fail(mismatches.join('\n\n'));
  });
});
