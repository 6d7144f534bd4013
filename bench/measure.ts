import type { LoadGenerator } from './children.ts';
import { log, sleep, type Abort } from './control.ts';
import { postgresCost, type PostgresCost, type PostgresIdle, type PostgresSnapshot } from './postgres.ts';
import { machineCpuSeconds, treeCpuSeconds } from './procfs.ts';
import type { CpuTotal, RunRecord } from './report.ts';
import type { CpuReading, RuntimeCounters, RuntimeName, RuntimeUnderTest } from './runtimes.ts';
import type { LoadGeneratorName, Settings } from './settings.ts';
import type { Workload } from './workloads.ts';

/**
 * The measurement: a warm-up, then every workload × concurrency × round on every runtime in turn (Ratchet and
 * restate-server, or the clusters of cluster mode), with CPU time of every process involved read before and after each
 * run and memory sampled during it; in cluster mode also PostgreSQL's own counters.
 */

export interface Stack {
  readonly runtimes: Map<RuntimeName, RuntimeUnderTest>;
  /** PID of each runtime's SDK service host. */
  readonly services: Map<RuntimeName, number>;
  readonly load: LoadGenerator;
}

const POSTGRES_EVERY = 4;

/**
 * Samples the memory of the runtime under load every `intervalMs` until stopped; keeps the peaks. PostgreSQL's PSS
 * only every `POSTGRES_EVERY`th time and once more at the end: reading it walks the page tables of every backend,
 * which cost the harness 0.05–0.09 cores at every 500 ms, taken from Ratchet's runs only (restate-server has no
 * PostgreSQL), while the runtime's RSS is one line of /proc/<pid>/status.
 */
function memorySampler(runtime: RuntimeUnderTest, intervalMs: number) {
  let peakRuntimeRss = 0;
  let peakPostgresPss = 0;
  let running = true;
  let wake: (() => void) | undefined;
  const sample = async (withPostgres: boolean): Promise<void> => {
    const m = await runtime.memory(withPostgres);
    peakRuntimeRss = Math.max(peakRuntimeRss, m.runtimeRss);
    peakPostgresPss = Math.max(peakPostgresPss, m.postgresPss);
  };
  const loop = (async () => {
    for (let tick = 0; running; tick++) {
      await sample(tick % POSTGRES_EVERY === POSTGRES_EVERY - 1);
      // Interruptible, so the next run does not wait for the rest of an interval.
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, intervalMs);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    await sample(true);
  })();
  let stopped: Promise<{ peakRuntimeRss: number; peakPostgresPss: number }> | undefined;
  return {
    stop() {
      stopped ??= (async () => {
        running = false;
        wake?.();
        await loop;
        return { peakRuntimeRss, peakPostgresPss };
      })();
      return stopped;
    },
  };
}

interface CpuSnapshot {
  readonly at: bigint;
  readonly runtime: CpuReading;
  readonly service: number;
  readonly loadGenerator: number;
  /** This process: the sampling and bookkeeping. */
  readonly harness: number;
  readonly machine: { readonly busy: number; readonly steal: number };
}

async function snapshot(stack: Stack, runtime: RuntimeUnderTest): Promise<CpuSnapshot> {
  const [cpu, service, loadGenerator, machine] = await Promise.all([
    runtime.cpu(),
    treeCpuSeconds(stack.services.get(runtime.name) ?? -1),
    treeCpuSeconds(stack.load.forked.child.pid ?? -1),
    machineCpuSeconds(),
  ]);
  const own = process.cpuUsage();
  const harness = (own.user + own.system) / 1e6;
  return { at: process.hrtime.bigint(), runtime: cpu, service, loadGenerator, harness, machine };
}

function countersBetween(before: RuntimeCounters, after: RuntimeCounters): RuntimeCounters {
  const delta: Partial<Record<keyof RuntimeCounters, number | readonly number[]>> = {};
  for (const key of Object.keys(after) as (keyof RuntimeCounters)[]) {
    const a = after[key];
    const b = before[key];
    if (typeof a === 'number' && typeof b === 'number') delta[key] = a - b;
    else if (Array.isArray(a) && Array.isArray(b)) delta[key] = a.map((x: number, i) => x - ((b[i] as number) ?? 0));
  }
  return delta as RuntimeCounters;
}

function cpuBetween(before: CpuSnapshot, after: CpuSnapshot): RunRecord['cpu'] {
  return {
    windowS: Number(after.at - before.at) / 1e9,
    runtime: after.runtime.runtime - before.runtime.runtime,
    postgres: after.runtime.postgres - before.runtime.postgres,
    service: after.service - before.service,
    loadGenerator: after.loadGenerator - before.loadGenerator,
    harness: after.harness - before.harness,
    machineBusy: after.machine.busy - before.machine.busy,
    steal: after.machine.steal - before.machine.steal,
  };
}

export async function measure(
  settings: Settings,
  stack: Stack,
  abort: Abort,
): Promise<{ records: RunRecord[]; totals: CpuTotal[]; postgresIdle: Partial<Record<RuntimeName, PostgresIdle>> }> {
  const names: RuntimeName[] = [...stack.runtimes.keys()];
  const invocations = new Map<RuntimeName, number>(names.map((n) => [n, 0]));
  const cpuAtStart = new Map(
    await Promise.all(names.map(async (n) => [n, await stack.runtimes.get(n)!.cpu()] as const)),
  );

  const drive = async (
    runtime: RuntimeUnderTest,
    generator: LoadGeneratorName,
    workload: Workload,
    connections: number,
    durationS: number,
  ) => {
    const url = runtime.ingressUrls ?? runtime.ingressUrl;
    const stats = await abort.race(stack.load.run({ url, generator, workload, connections, durationS }));
    invocations.set(runtime.name, (invocations.get(runtime.name) ?? 0) + stats.ok + stats.non2xx);
    if (abort.reason !== undefined) throw abort.reason;
    return stats;
  };

  // Cluster mode: PostgreSQL's cumulative statistics reach the views up to 10 s after a backend goes idle, so they are
  // read `pgSettleS` after each run, and the idle background is measured over as long a window first.
  const withPostgres = names.filter((n) => stack.runtimes.get(n)!.postgresStats !== undefined);
  const pgStats = (name: RuntimeName): Promise<PostgresSnapshot> | undefined =>
    stack.runtimes.get(name)!.postgresStats?.();
  const settle = async (): Promise<void> => {
    if (withPostgres.length > 0 && settings.pgSettleS > 0) await abort.race(sleep(settings.pgSettleS * 1000));
  };
  const postgresIdle: Partial<Record<RuntimeName, PostgresIdle>> = {};
  if (withPostgres.length > 0 && settings.pgSettleS > 0) {
    log(`PostgreSQL's idle background: ${settings.pgSettleS} s without load`);
    await settle(); // what registration and the checks left unreported
    const before = await Promise.all(withPostgres.map((n) => pgStats(n)!));
    const started = process.hrtime.bigint();
    await settle();
    const after = await Promise.all(withPostgres.map((n) => pgStats(n)!));
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    withPostgres.forEach((n, i) => {
      postgresIdle[n] = { seconds, cost: postgresCost(before[i]!, after[i]!, after[i]!, 0) };
    });
  }

  if (settings.warmupS > 0) {
    log(`warm-up: ${settings.warmupS} s per workload and runtime at c=16`);
    for (const workload of settings.workloads) {
      for (const name of names)
        await drive(stack.runtimes.get(name)!, settings.loadGenerators[0]!, workload, 16, settings.warmupS);
    }
    await settle();
  }

  const records: RunRecord[] = [];
  const cells =
    settings.workloads.length * settings.concurrencies.length * settings.loadGenerators.length * settings.rounds;
  let cell = 0;
  for (let round = 1; round <= settings.rounds; round++) {
    // Counterbalanced: A B in odd rounds, B A in even ones, so neither always runs right after the other.
    const order = round % 2 === 1 ? names : [...names].reverse();
    const generators = round % 2 === 1 ? settings.loadGenerators : [...settings.loadGenerators].reverse();
    for (const workload of settings.workloads) {
      for (const concurrency of settings.concurrencies) {
        for (const generator of generators) {
          cell++;
          for (const name of order) {
            const runtime = stack.runtimes.get(name)!;
            const sampler = memorySampler(runtime, 500);
            // The scrape is outside the CPU window on both sides, so its cost is not counted as the workload's.
            const countersBefore = await runtime.counters();
            const pgBefore = await pgStats(name);
            const before = await snapshot(stack, runtime);
            const stats = await drive(runtime, generator, workload, concurrency, settings.durationS).finally(() =>
              sampler.stop(),
            );
            const after = await snapshot(stack, runtime);
            const countersAfter = await runtime.counters();
            const pgAfter = await pgStats(name);
            const memory = await sampler.stop();
            let postgres: PostgresCost | undefined;
            if (pgBefore !== undefined && pgAfter !== undefined) {
              const settleStarted = process.hrtime.bigint();
              await settle();
              const settled = (await pgStats(name))!;
              const settleS = Number(process.hrtime.bigint() - settleStarted) / 1e9;
              postgres = postgresCost(pgBefore, pgAfter, settled, settleS, postgresIdle[name]);
            }
            const record: RunRecord = {
              round,
              workload,
              concurrency,
              runtime: name,
              loadGenerator: generator,
              stats,
              cpu: cpuBetween(before, after),
              counters: countersBetween(countersBefore, countersAfter),
              peakRuntimeRss: memory.peakRuntimeRss,
              peakPostgresPss: memory.peakPostgresPss,
              ...(postgres === undefined ? {} : { postgres }),
            };
            records.push(record);
            const failed = stats.non2xx + stats.errors;
            const { cpu } = record;
            // Readings a few ms apart on either side make this slightly negative when nothing else ran.
            const others = Math.max(
              0,
              cpu.machineBusy - cpu.runtime - cpu.postgres - cpu.service - cpu.loadGenerator - cpu.harness,
            );
            log(
              `[${cell}/${cells}] round ${round} ${workload} c=${concurrency} ${generator} ${name}: ` +
                `${stats.rps.toFixed(0)} req/s, ` +
                `p50 ${stats.latencyMs.p50.toFixed(2)} ms, p99 ${stats.latencyMs.p99.toFixed(2)} ms, ` +
                `CPU ${(cpu.runtime + cpu.postgres).toFixed(2)} s; cores busy ${(cpu.machineBusy / cpu.windowS).toFixed(2)}, ` +
                `other processes ${(others / cpu.windowS).toFixed(2)}` +
                (postgres === undefined ? '' : `; ${clusterLine(record)}`) +
                (failed > 0 ? `; ${failed} FAILED (${JSON.stringify(stats.statusCodes)})` : ''),
            );
          }
        }
      }
    }
  }

  const totals: CpuTotal[] = [];
  for (const name of names) {
    const runtime = stack.runtimes.get(name)!;
    const start = cpuAtStart.get(name)!;
    const end = await runtime.cpu();
    const cpuSeconds = { runtime: end.runtime - start.runtime, postgres: end.postgres - start.postgres };
    const count = invocations.get(name) ?? 0;
    totals.push({
      runtime: name,
      invocations: count,
      cpuSeconds,
      msPerInvocation: count === 0 ? 0 : ((cpuSeconds.runtime + cpuSeconds.postgres) / count) * 1000,
      peakRssMiB: (await runtime.peakRss()) / (1024 * 1024),
    });
  }
  return { records, totals, postgresIdle };
}

/** Cluster mode's additions to a run's log line: PostgreSQL's work and forwarding, per invocation. */
function clusterLine(record: RunRecord): string {
  const n = Math.max(1, record.stats.ok);
  const pg = record.postgres!;
  const c = record.counters;
  const per = (v: number | undefined, digits = 2): string => (v === undefined ? '?' : (v / n).toFixed(digits));
  return (
    `per invocation ${per(pg.transactions)} transactions, ${per(c.roundTrips)} round trips, ` +
    `${per(pg.statements)} statements, ${per(pg.walBytes, 0)} WAL bytes; ${per(c.forwarded)} forwarded` +
    ((c.forwardMisdirected ?? 0) > 0 ? `, ${c.forwardMisdirected} refused (421)` : '') +
    ((c.forwardFailed ?? 0) + (c.forwardNoOwner ?? 0) > 0
      ? `, ${(c.forwardFailed ?? 0) + (c.forwardNoOwner ?? 0)} forwards FAILED`
      : '') +
    ((c.partitionMoves ?? 0) > 0 ? `, ${c.partitionMoves} partition moves` : '')
  );
}
