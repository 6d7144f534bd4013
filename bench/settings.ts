import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { REPO_ROOT } from '../test/support/runtime-process.ts';
import { KAFKA_SINKS, KAFKA_WORKLOAD, WORKLOADS, type KafkaSink, type Workload } from './workloads.ts';

/** The command line of `npm run bench`. */

/**
 * `autocannon`: autocannon 9, a Node library, in the load-generator process (one event loop for all connections).
 * `wrk`: Debian's wrk 4.1, a C program with one thread per core (two here), a child of that process.
 */
export const LOAD_GENERATORS = ['autocannon', 'wrk'] as const;
export type LoadGeneratorName = (typeof LOAD_GENERATORS)[number];

export interface Settings {
  readonly mode: 'full' | 'quick';
  readonly rounds: number;
  readonly durationS: number;
  readonly warmupS: number;
  readonly concurrencies: readonly number[];
  /** The HTTP workloads (driven by the load generators); may be empty when only `kafka` was asked for. */
  readonly workloads: readonly Workload[];
  /** `--workloads` named `kafka`: the Kafka workload runs after the HTTP ones (`bench/kafka.ts`). */
  readonly kafka: boolean;
  /** Records per Kafka run, and the sinks the Kafka workload runs (each a run per runtime and round). */
  readonly kafkaRecords: number;
  readonly kafkaSinks: readonly KafkaSink[];
  /** Every cell is measured with each of these, one after the other (the first also drives the warm-up). */
  readonly loadGenerators: readonly LoadGeneratorName[];
  readonly resultsDir: string;
  /** Extra `RATCHET_*` environment for the Ratchet process (A/B experiments with its settings). */
  readonly ratchetEnv: Readonly<Record<string, string>>;
  /** The checkout Ratchet runs from (e.g. a copy of a commit); undefined: this one. */
  readonly ratchetRoot: string | undefined;
  /** Where Ratchet writes a V8 CPU profile of the whole run (`node --cpu-prof`), if anywhere. */
  readonly cpuProfDir: string | undefined;
  /**
   * Cluster mode when not empty: one Ratchet cluster of each size (runtime processes on one PostgreSQL of their own),
   * measured side by side instead of Ratchet against restate-server.
   */
  readonly clusterSizes: readonly number[];
  /**
   * Cluster mode: seconds to wait after each run before reading PostgreSQL's cumulative statistics (transactions, WAL
   * records and syncs), which a backend reports up to 10 s after it goes idle.
   */
  readonly pgSettleS: number;
}

export const USAGE = `usage: npm run bench [-- options]
  --quick               one short round at c=1 and c=16: checks the harness, a few seconds of load
  --rounds N            rounds per workload, concurrency and runtime (default 2)
  --duration S          seconds per run (default 8)
  --warmup S            seconds of warm-up per workload and runtime at c=16 before measuring (default 2)
  --concurrency LIST    comma-separated connection counts (default 1,16,128)
  --workloads LIST      comma-separated subset of ${WORKLOADS.join(',')},${KAFKA_WORKLOAD} (default ${WORKLOADS.join(',')});
                        ${KAFKA_WORKLOAD} only when named: a mock Kafka (kcat) and a subscription per runtime; N records
                        produced at once, each one invocation; prints records/s (first produce to last invocation
                        completed), lag (produced - invocations created, every 500 ms) and CPU per record
  --kafka-records N     records per Kafka run (default 20000; 2000 with --quick)
  --kafka-sinks LIST    the handlers the Kafka records go to: ${KAFKA_SINKS.join(',')} (default both; noop = service
                        Bench.noop, add = virtual object Counter.add with the record key as object key)
  --load-generator G    wrk, autocannon or both (default both; --quick and --nodes: autocannon); wrk is installed
                        with apt-get when missing
  --results-dir DIR     where the JSON results go (default bench/results)
  --ratchet-env K=V     extra environment for Ratchet, e.g. RATCHET_GROUP_COMMIT_CONCURRENCY=1 (repeatable)
  --ratchet-root DIR    run Ratchet from another checkout (e.g. a git worktree of a commit; default this one)
  --cpu-prof DIR        Ratchet writes a V8 CPU profile of its whole run into DIR (node --cpu-prof)
  --nodes LIST          cluster mode: comma-separated cluster sizes, e.g. 1,3: each an N-node Ratchet cluster on its
                        own PostgreSQL (with pg_stat_statements), load spread over its N ingresses, measured side by
                        side with PostgreSQL's cost per invocation; no restate-server
  --pg-settle S         cluster mode: seconds after each run before PostgreSQL's cumulative statistics are read
                        (default 11; 0 with --quick)`;

function positive(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0) throw new UsageError(`--${name} must be a non-negative number, got ${value}`);
  return n;
}

export class UsageError extends Error {}

/**
 * `RATCHET_NAME=value` items (of the option `option`) as an environment; `NODE_OPTIONS=…` too, for V8 flags
 * (e.g. `NODE_OPTIONS=--max-semi-space-size=32`).
 */
export function parseRatchetEnv(items: readonly string[], option: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const kv of items) {
    const eq = kv.indexOf('=');
    if (eq <= 0 || !(kv.startsWith('RATCHET_') || kv.startsWith('NODE_OPTIONS=')))
      throw new UsageError(`${option} takes RATCHET_NAME=value or NODE_OPTIONS=value, got ${kv}`);
    env[kv.slice(0, eq)] = kv.slice(eq + 1);
  }
  return env;
}

export function parseSettings(argv: readonly string[]): Settings {
  let values;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: {
        quick: { type: 'boolean', default: false },
        rounds: { type: 'string' },
        duration: { type: 'string' },
        warmup: { type: 'string' },
        concurrency: { type: 'string' },
        workloads: { type: 'string' },
        'load-generator': { type: 'string' },
        'results-dir': { type: 'string' },
        'ratchet-env': { type: 'string', multiple: true },
        'cpu-prof': { type: 'string' },
        'ratchet-root': { type: 'string' },
        nodes: { type: 'string' },
        'pg-settle': { type: 'string' },
        'kafka-records': { type: 'string' },
        'kafka-sinks': { type: 'string' },
        help: { type: 'boolean', default: false },
      },
      strict: true,
    }));
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
  if (values.help) throw new UsageError('');
  const quick = values.quick;
  const concurrencies = (values.concurrency ?? (quick ? '1,16' : '1,16,128')).split(',').map((c) => {
    const n = Number(c);
    if (!Number.isInteger(n) || n < 1) throw new UsageError(`--concurrency takes positive integers, got ${c}`);
    return n;
  });
  const named = (values.workloads ?? WORKLOADS.join(',')).split(',');
  const kafka = named.includes(KAFKA_WORKLOAD);
  const workloads = named
    .filter((w) => w !== KAFKA_WORKLOAD)
    .map((w) => {
      if (!(WORKLOADS as readonly string[]).includes(w)) throw new UsageError(`unknown workload ${w}`);
      return w as Workload;
    });
  const kafkaRecords = positive('kafka-records', values['kafka-records'], quick ? 2000 : 20_000);
  if (!Number.isInteger(kafkaRecords) || kafkaRecords < 1)
    throw new UsageError('--kafka-records must be an integer ≥ 1');
  const kafkaSinks = (values['kafka-sinks'] ?? KAFKA_SINKS.join(',')).split(',').map((k) => {
    if (!(KAFKA_SINKS as readonly string[]).includes(k)) throw new UsageError(`unknown Kafka sink ${k}`);
    return k as KafkaSink;
  });
  if (!kafka && (values['kafka-records'] !== undefined || values['kafka-sinks'] !== undefined))
    throw new UsageError(`--kafka-records and --kafka-sinks need --workloads with ${KAFKA_WORKLOAD}`);
  const rounds = positive('rounds', values.rounds, quick ? 1 : 2);
  if (!Number.isInteger(rounds) || rounds < 1) throw new UsageError('--rounds must be an integer ≥ 1');
  const durationS = positive('duration', values.duration, quick ? 1.5 : 8);
  if (durationS <= 0) throw new UsageError('--duration must be > 0');
  const ratchetEnv = parseRatchetEnv(values['ratchet-env'] ?? [], '--ratchet-env');
  const clusterSizes = (values.nodes ?? '')
    .split(',')
    .filter((n) => n !== '')
    .map((c) => {
      const n = Number(c);
      if (!Number.isInteger(n) || n < 1 || n > 16)
        throw new UsageError(`--nodes takes integers from 1 to 16, got ${c}`);
      return n;
    });
  if (new Set(clusterSizes).size !== clusterSizes.length) throw new UsageError('--nodes lists a size twice');
  if (values.nodes !== undefined && clusterSizes.length === 0) throw new UsageError('--nodes needs at least one size');
  if (values['ratchet-root'] !== undefined && clusterSizes.length > 0)
    throw new UsageError('--ratchet-root is for the default mode, not --nodes');
  if (values['pg-settle'] !== undefined && clusterSizes.length === 0) throw new UsageError('--pg-settle needs --nodes');
  if (kafka && clusterSizes.length > 0) throw new UsageError(`--nodes does not run the ${KAFKA_WORKLOAD} workload`);
  const loadGenerators = parseLoadGenerators(values['load-generator'], quick || clusterSizes.length > 0);
  if (clusterSizes.length > 0 && loadGenerators.includes('wrk'))
    throw new UsageError('cluster mode spreads connections over several ingresses, which wrk cannot: use autocannon');
  return {
    mode: quick ? 'quick' : 'full',
    rounds,
    durationS,
    warmupS: positive('warmup', values.warmup, quick ? 0 : 2),
    concurrencies,
    workloads,
    kafka,
    kafkaRecords,
    kafkaSinks,
    loadGenerators,
    resultsDir: values['results-dir'] ?? join(REPO_ROOT, 'bench', 'results'),
    ratchetEnv,
    ratchetRoot: values['ratchet-root'],
    cpuProfDir: values['cpu-prof'],
    clusterSizes,
    pgSettleS: positive('pg-settle', values['pg-settle'], quick ? 0 : 11),
  };
}

/** `--load-generator`: `wrk`, `autocannon` or `both` (autocannon first). */
export function parseLoadGenerators(value: string | undefined, autocannonOnly: boolean): LoadGeneratorName[] {
  const v = value ?? (autocannonOnly ? 'autocannon' : 'both');
  if (v === 'both') return [...LOAD_GENERATORS];
  if ((LOAD_GENERATORS as readonly string[]).includes(v)) return [v as LoadGeneratorName];
  throw new UsageError(`--load-generator takes ${LOAD_GENERATORS.join(', ')} or both, got ${v}`);
}
