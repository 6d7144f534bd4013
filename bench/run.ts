import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import { join, relative } from 'node:path';
import * as prettier from 'prettier';
import type { ExitStatus } from '../test/support/child-process.ts';
import { LoadGenerator, forkModule, startServiceHost } from './children.ts';
import { startRatchetCluster, type RatchetCluster } from './cluster.ts';
import { Abort, describe, log, settleAll, sleep } from './control.ts';
import { measureKafka } from './kafka.ts';
import { formatKafkaReport, type KafkaResult } from './kafka-report.ts';
import { measure, type Stack } from './measure.ts';
import { formatClusterReport, formatReport } from './report-tables.ts';
import { clusterRatios, ratios, summarize, targets } from './report.ts';
import {
  PROTOCOL_VERSION,
  clusterName,
  register,
  startRatchet,
  startRestate,
  type RuntimeName,
  type RuntimeUnderTest,
} from './runtimes.ts';
import { USAGE, UsageError, parseSettings, type Settings } from './settings.ts';
import { ensureWrk, wrkThreads } from './wrk.ts';
import { OBJECT_KEYS, SERVICES, isExpectedResponse, workloadRequest, type Workload } from './workloads.ts';

/**
 * `npm run bench`: Ratchet and restate-server side by side on the same SDK services, driven by the same load generator,
 * interleaved run by run so that noise on this shared machine hits both alike. `npm run bench -- --quick` is the CI
 * check that the harness works (no speed assertions). `npm run bench -- --nodes 1,3` (cluster mode) measures Ratchet
 * clusters of those sizes side by side instead, each on its own PostgreSQL, with PostgreSQL's cost per invocation.
 * See bench/README.md.
 */

/**
 * One call per workload with the expected answer, before any measurement: a runtime that answers wrongly (or not yet:
 * restate-server's ingress learns of a new deployment a moment after the admin API answered) must not be timed.
 */
async function checkWorkloads(runtime: RuntimeUnderTest, workloads: readonly Workload[]): Promise<void> {
  // A cluster: through every node's ingress.
  for (const ingressUrl of runtime.ingressUrls ?? [runtime.ingressUrl])
    await checkWorkloadsAt(runtime, ingressUrl, workloads);
}

async function checkWorkloadsAt(
  runtime: RuntimeUnderTest,
  ingressUrl: string,
  workloads: readonly Workload[],
): Promise<void> {
  for (const workload of workloads) {
    const request = workloadRequest(workload, 0);
    const deadline = Date.now() + 30_000;
    let last = '';
    for (;;) {
      try {
        const res = await fetch(`${ingressUrl}${request.path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: request.body,
          signal: AbortSignal.timeout(10_000),
        });
        const text = await res.text();
        if (res.status === 200 && isExpectedResponse(workload, JSON.parse(text))) break;
        last = `${res.status} ${text}`;
      } catch (err) {
        last = err instanceof Error ? err.message : String(err);
      }
      if (Date.now() > deadline) {
        throw new Error(
          `${runtime.name} does not answer ${workload} (${ingressUrl}${request.path}) as expected; last: ${last}`,
        );
      }
      await sleep(200);
    }
  }
}

interface MachineDescription {
  readonly cpuModel: string;
  readonly cpus: number;
  readonly memoryGiB: number;
  readonly os: string;
  readonly node: string;
  readonly loadAverageAtStart: readonly number[];
  readonly note: string;
}

function loadAverage(): number[] {
  return os.loadavg().map((l) => Math.round(l * 100) / 100);
}

function machineDescription(): MachineDescription {
  const cpus = os.cpus();
  return {
    cpuModel: cpus[0]?.model ?? 'unknown',
    cpus: cpus.length,
    memoryGiB: Math.round((os.totalmem() / 1024 ** 3) * 10) / 10,
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
    loadAverageAtStart: loadAverage(),
    note: 'shared machine; load generator, SDK services and both runtimes on the same cores',
  };
}

/** JSON as the repository's Prettier config writes it, so a committed result passes `npm run format:check`. */
async function writeResults(file: string, results: unknown): Promise<void> {
  const options = (await prettier.resolveConfig(file)) ?? {};
  await writeFile(file, await prettier.format(JSON.stringify(results), { ...options, parser: 'json' }));
}

/** The nodes log at `warn` and above: a line there is worth a look (the JSON has the last ones as `nodeLogs`). */
function logSummary(logs: Record<string, Record<string, string[]>>): string {
  const lines = Object.entries(logs).flatMap(([cluster, nodes]) =>
    Object.entries(nodes)
      .filter(([, tail]) => tail.length > 0)
      .map(
        ([node, tail]) =>
          `${cluster} ${node}: ${tail.length} distinct log line(s), the last: ${tail[tail.length - 1]!.slice(0, 300)}`,
      ),
  );
  return lines.length === 0
    ? ''
    : `Node logs (warn and above; the last lines are in the JSON as nodeLogs):\n${lines.join('\n')}\n\n`;
}

/** Cluster mode's end: what the clusters look like after the runs, the report, and the JSON results. */
async function reportClusters(
  settings: Settings,
  clusters: readonly RatchetCluster[],
  result: Awaited<ReturnType<typeof measure>>,
  started: number,
  machineAtStart: MachineDescription,
): Promise<void> {
  const names = clusters.map((c) => c.name);
  const ownershipAtEnd = Object.fromEntries(
    await Promise.all(clusters.map(async (c) => [c.name, await c.ownership().catch(() => undefined)] as const)),
  );
  const storage = Object.fromEntries(
    await Promise.all(clusters.map(async (c) => [c.name, await c.storage().catch(() => undefined)] as const)),
  );
  const nodeLogs = Object.fromEntries(clusters.map((c) => [c.name, c.logTails()]));
  const summaries = summarize(result.records);
  const ratioRows = clusterRatios(summaries, names[0]!);
  const report = formatClusterReport(summaries, ratioRows, result.totals, result.postgresIdle, storage);
  const machine = { ...machineAtStart, loadAverageAtEnd: loadAverage() };
  const finished = new Date();
  const totalS = (finished.getTime() - started) / 1000;
  await mkdir(settings.resultsDir, { recursive: true });
  const file = join(
    settings.resultsDir,
    `${finished.toISOString().replace(/[:.]/g, '-')}-nodes-${settings.clusterSizes.join('-')}` +
      `${settings.mode === 'quick' ? '-quick' : ''}.json`,
  );
  await writeResults(file, {
    format: 1,
    mode: settings.mode,
    clusterMode: true,
    startedAt: new Date(started).toISOString(),
    finishedAt: finished.toISOString(),
    wallClockS: totalS,
    machine,
    settings: {
      rounds: settings.rounds,
      durationS: settings.durationS,
      warmupS: settings.warmupS,
      pgSettleS: settings.pgSettleS,
      concurrencies: settings.concurrencies,
      workloads: settings.workloads,
      clusterSizes: settings.clusterSizes,
      ratchetEnv: settings.ratchetEnv,
      objectKeys: OBJECT_KEYS,
      protocolVersion: PROTOCOL_VERSION,
      loadGenerator:
        'autocannon 9 (HTTP/1.1 keep-alive, one request in flight per connection), own process; connection i ' +
        'to node i mod N',
      sdk: '@restatedev/restate-sdk over h2c, one service process per cluster (its deployment, shared by the nodes)',
    },
    runtimes: Object.fromEntries(clusters.map((c) => [c.name, c.description])),
    ownershipAtEnd,
    storage,
    nodeLogs,
    postgresIdle: result.postgresIdle,
    summaries,
    ratios: ratioRows,
    totals: result.totals,
    runs: result.records,
  });
  process.stdout.write(
    `\nRatchet clusters of ${settings.clusterSizes.join(', ')} node(s), each on its own PostgreSQL — ` +
      `${settings.mode} mode, protocol V${PROTOCOL_VERSION}, ${settings.rounds} round(s) × ${settings.durationS} s per cell\n` +
      `machine: ${machine.cpus} × ${machine.cpuModel}, ${machine.memoryGiB} GiB, ${machine.os}, Node ${machine.node}; ` +
      `load average ${machine.loadAverageAtStart.join(' ')} at start, ${machine.loadAverageAtEnd.join(' ')} at end\n\n` +
      `${report}\n\n` +
      logSummary(nodeLogs) +
      `results: ${relative(process.cwd(), file) || file}\nwall clock: ${totalS.toFixed(0)} s\n`,
  );
}

/** What drove the runs, for the JSON. */
function loadGeneratorDescription(settings: Settings): Record<string, string> {
  const described: Record<string, string> = {};
  for (const generator of settings.loadGenerators) {
    described[generator] =
      generator === 'wrk'
        ? `wrk 4.1 (Debian), a child of the load-generator process: HTTP/1.1 keep-alive, one request in flight per ` +
          `connection, threads ${settings.concurrencies.map((c) => `${wrkThreads(c)} at c=${c}`).join(', ')}, ` +
          `${Math.max(1, Math.round(settings.durationS))} s per run (whole seconds)`
        : 'autocannon 9 in the load-generator process (Node): HTTP/1.1 keep-alive, one request in flight per connection';
  }
  return described;
}

interface Service {
  readonly url: string;
  readonly pid: number;
}

async function main(): Promise<number> {
  let settings: Settings;
  try {
    settings = parseSettings(process.argv.slice(2));
  } catch (err) {
    if (err instanceof UsageError) {
      if (err.message !== '') process.stderr.write(`${err.message}\n`);
      process.stderr.write(`${USAGE}\n`);
      return err.message === '' ? 0 : 2;
    }
    throw err;
  }

  if (settings.workloads.length > 0 && settings.loadGenerators.includes('wrk')) {
    try {
      ensureWrk(log);
    } catch (err) {
      process.stderr.write(`${describe(err)}\n`);
      return 1;
    }
  }
  const started = Date.now();
  const machineAtStart = machineDescription();
  const abort = new Abort();
  // Stopped in this order: the load generator, then the runtimes (together), then the services they call.
  const cleanups = {
    load: [] as (() => Promise<void>)[],
    runtimes: [] as (() => Promise<void>)[],
    services: [] as (() => Promise<void>)[],
  };
  let load: LoadGenerator | undefined;
  const runtimesStarted: RuntimeUnderTest[] = [];
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals): void => {
    signals++;
    if (signals > 1) {
      log(`${signal} again: killing the children without waiting (some temp dirs under /tmp may remain)`);
      for (const runtime of runtimesStarted) runtime.forceStop();
      process.exit(130); // trackChild's exit hook SIGKILLs the other children
    }
    log(`${signal}: stopping (again to force)`);
    load?.stopRun();
    abort.abort(new Error(`interrupted by ${signal}`));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  let stopping = false;
  /** A child that exits while the harness still needs it ends the benchmark with its output. */
  const watch = (what: string, exited: Promise<ExitStatus>, output: () => string): void => {
    void exited.then((status) => {
      if (stopping) return;
      abort.abort(
        new Error(`${what} exited unexpectedly (${JSON.stringify(status)}). Output:\n${output().slice(-6000)}`),
      );
    });
  };
  let startup: Promise<unknown> | undefined;

  try {
    const clusterMode = settings.clusterSizes.length > 0;
    const kafkaPlan = settings.kafka
      ? `kafka: ${settings.kafkaSinks.join(', ')} × ${settings.rounds} round(s) × ${settings.kafkaRecords} records per runtime`
      : '';
    log(
      settings.workloads.length === 0
        ? `${settings.mode} mode: ${kafkaPlan}`
        : `${settings.mode} mode: ${settings.workloads.join(', ')} × c=${settings.concurrencies.join('/')} × ` +
            `${settings.rounds} round(s) × ${settings.durationS} s per runtime; protocol V${PROTOCOL_VERSION} for ` +
            (clusterMode ? `all; Ratchet clusters of ${settings.clusterSizes.join(', ')} node(s)` : 'both') +
            (settings.kafka ? `; then ${kafkaPlan}` : ''),
    );
    // Everything starts at once: Ratchet's PostgreSQL initdb is the slow part.
    const startService = async (name: RuntimeName): Promise<Service> => {
      const host = await startServiceHost(name);
      cleanups.services.push(() => host.forked.stop());
      watch(host.forked.what, host.forked.exited, host.forked.output);
      return { url: host.url, pid: host.forked.child.pid ?? -1 };
    };
    const startRuntime = async (name: RuntimeName): Promise<RuntimeUnderTest> => {
      let runtime: RuntimeUnderTest;
      try {
        runtime =
          name === 'ratchet'
            ? await startRatchet(settings.ratchetEnv, settings.cpuProfDir, settings.ratchetRoot)
            : await startRestate();
      } catch (err) {
        throw new Error(`${name === 'ratchet' ? 'Ratchet' : 'restate-server'} did not start`, { cause: err });
      }
      cleanups.runtimes.push(() => runtime.stop());
      runtimesStarted.push(runtime);
      return runtime;
    };
    const startLoad = async (): Promise<LoadGenerator> => {
      const forked = await forkModule('load-generator.ts', 'load generator');
      cleanups.load.push(() => forked.stop());
      watch(forked.what, forked.exited, forked.output);
      return new LoadGenerator(forked);
    };
    if (clusterMode) {
      const startCluster = async (size: number): Promise<RatchetCluster> => {
        const cluster = await startRatchetCluster(size, settings.ratchetEnv, settings.cpuProfDir);
        cleanups.runtimes.push(() => cluster.stop());
        runtimesStarted.push(cluster);
        return cluster;
      };
      const names = settings.clusterSizes.map(clusterName);
      const starting = settleAll<[Service[], RatchetCluster[], LoadGenerator]>([
        settleAll<Service[]>(names.map(startService)),
        settleAll<RatchetCluster[]>(settings.clusterSizes.map(startCluster)),
        startLoad(),
      ]);
      startup = starting;
      const [services, clusters, generator] = await abort.race(starting);
      load = generator;
      const stack: Stack = {
        runtimes: new Map(clusters.map((c) => [c.name, c])),
        services: new Map(names.map((n, i) => [n, services[i]!.pid])),
        load,
      };
      for (const rt of stack.runtimes.values()) watch(rt.name, rt.exited, () => rt.output());
      log(
        `started in ${((Date.now() - started) / 1000).toFixed(1)} s (${clusters
          .map(
            (c) =>
              `${c.name}: ${String(c.description['partitions'])} partitions balanced after ${Number(c.description['balancedAfterS']).toFixed(1)} s`,
          )
          .join('; ')}); registering the SDK services`,
      );
      await abort.race(
        Promise.all(
          clusters.map(async (c, i) => {
            await register(c, services[i]!.url);
            await c.waitForServices(SERVICES.map((svc) => svc.name));
            await checkWorkloads(c, settings.workloads);
          }),
        ),
      );
      const result = await measure(settings, stack, abort);
      stopping = true;
      await reportClusters(settings, clusters, result, started, machineAtStart);
      return 0;
    }
    const starting = settleAll<[Service, Service, RuntimeUnderTest, RuntimeUnderTest, LoadGenerator]>([
      startService('ratchet'),
      startService('restate'),
      startRuntime('ratchet'),
      startRuntime('restate'),
      startLoad(),
    ]);
    startup = starting;
    const [ratchetService, restateService, ratchet, restate, generator] = await abort.race(starting);
    load = generator;
    const stack: Stack = {
      runtimes: new Map([
        ['ratchet', ratchet],
        ['restate', restate],
      ]),
      services: new Map([
        ['ratchet', ratchetService.pid],
        ['restate', restateService.pid],
      ]),
      load,
    };
    for (const rt of stack.runtimes.values()) watch(rt.name, rt.exited, () => rt.output());
    log(`started in ${((Date.now() - started) / 1000).toFixed(1)} s; registering the SDK services`);

    await abort.race(Promise.all([register(ratchet, ratchetService.url), register(restate, restateService.url)]));
    await abort.race(
      Promise.all([checkWorkloads(ratchet, settings.workloads), checkWorkloads(restate, settings.workloads)]),
    );

    // The HTTP workloads, then the Kafka workload (`--workloads kafka`), each only when asked for.
    const result = settings.workloads.length > 0 ? await measure(settings, stack, abort) : { records: [], totals: [] };
    let kafka: KafkaResult | undefined;
    if (settings.kafka) {
      kafka = await measureKafka(
        { records: settings.kafkaRecords, rounds: settings.rounds, sinks: settings.kafkaSinks },
        stack,
        abort,
      );
    }
    stopping = true;
    const summaries = summarize(result.records);
    const ratioRows = ratios(summaries);
    const targetRows = targets(summaries, result.totals);
    const report = [
      ...(settings.workloads.length > 0 ? [formatReport(summaries, ratioRows, result.totals, targetRows)] : []),
      ...(kafka === undefined ? [] : [formatKafkaReport(kafka)]),
    ].join('\n\n');

    const machine = { ...machineAtStart, loadAverageAtEnd: loadAverage() };
    const finished = new Date();
    const totalS = (finished.getTime() - started) / 1000;
    await mkdir(settings.resultsDir, { recursive: true });
    const file = join(
      settings.resultsDir,
      `${finished.toISOString().replace(/[:.]/g, '-')}${settings.mode === 'quick' ? '-quick' : ''}.json`,
    );
    const results = {
      format: 1,
      mode: settings.mode,
      startedAt: new Date(started).toISOString(),
      finishedAt: finished.toISOString(),
      wallClockS: totalS,
      machine,
      settings: {
        rounds: settings.rounds,
        durationS: settings.durationS,
        warmupS: settings.warmupS,
        concurrencies: settings.concurrencies,
        workloads: settings.workloads,
        ratchetEnv: settings.ratchetEnv,
        ...(settings.ratchetRoot === undefined ? {} : { ratchetRoot: settings.ratchetRoot }),
        objectKeys: OBJECT_KEYS,
        protocolVersion: PROTOCOL_VERSION,
        loadGenerators: settings.loadGenerators,
        loadGenerator: loadGeneratorDescription(settings),
        sdk: '@restatedev/restate-sdk over h2c, one service process per runtime',
      },
      runtimes: { ratchet: ratchet.description, restate: restate.description },
      summaries,
      ratios: ratioRows,
      totals: result.totals,
      targets: targetRows,
      runs: result.records,
      ...(kafka === undefined ? {} : { kafka }),
    };
    await writeResults(file, results);
    process.stdout.write(
      `\nRatchet vs restate-server ${String(restate.description['version'])} — ${settings.mode} mode, ` +
        `protocol V${PROTOCOL_VERSION}, ${settings.rounds} round(s) × ${settings.durationS} s per cell\n` +
        `machine: ${machine.cpus} × ${machine.cpuModel}, ${machine.memoryGiB} GiB, ${machine.os}, Node ${machine.node}; ` +
        `load average ${machine.loadAverageAtStart.join(' ')} at start, ${machine.loadAverageAtEnd.join(' ')} at end\n\n` +
        `${report}\n\n` +
        `results: ${relative(process.cwd(), file) || file}\nwall clock: ${totalS.toFixed(0)} s\n`,
    );
    return 0;
  } catch (err) {
    const reason = abort.reason ?? err;
    process.stderr.write(`\nbench failed: ${describe(reason)}\n`);
    return signals > 0 ? 130 : 1;
  } finally {
    stopping = true;
    log('stopping');
    // A signal during startup: whatever is still starting registers its cleanup first.
    await startup?.catch(() => undefined);
    for (const phase of [cleanups.load, cleanups.runtimes, cleanups.services]) {
      await Promise.all(phase.map((cleanup) => cleanup().catch((err: unknown) => log(`cleanup: ${describe(err)}`))));
    }
  }
}

main().then(
  (code) => {
    process.exitCode = code;
    // Sockets of fetch's keep-alive pool must not hold the process open after the report.
    setTimeout(() => process.exit(code), 200).unref();
  },
  (err: unknown) => {
    process.stderr.write(`bench crashed: ${describe(err)}\n`);
    process.exit(1);
  },
);
