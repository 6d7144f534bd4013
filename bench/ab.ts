import { parseArgs } from 'node:util';
import { forkModule, LoadGenerator, startServiceHost } from './children.ts';
import { treeCpuSeconds } from './procfs.ts';
import { register, startRatchet, type RuntimeUnderTest } from './runtimes.ts';
import { parseLoadGenerators, parseRatchetEnv } from './settings.ts';
import { ensureWrk } from './wrk.ts';
import { WORKLOADS, type Workload } from './workloads.ts';

/**
 * `npm run bench:ab`: two Ratchet processes with different settings side by side (no restate-server), the same
 * workload driven against each in turn (A B, B A, …) so that machine noise hits both alike. For deciding between two
 * values of a setting; `npm run bench` remains the measurement against restate-server.
 */

const USAGE = `usage: npm run bench:ab -- --a 'RATCHET_X=1 RATCHET_Y=2' --b 'RATCHET_X=2' [options]
  --workload W        one of ${WORKLOADS.join(', ')} (default noop)
  --concurrency N     connections (default 128)
  --rounds N          runs per variant (default 4; the first warms up and is not averaged when there are more)
  --duration S        seconds per run (default 6)
  --load-generator G  autocannon (default), wrk, or both (each run of a variant once with each, alternating)
  --a-root DIR        run A from another checkout of Ratchet (e.g. a git worktree of another commit; default this one)
  --b-root DIR        likewise for B`;

interface Variant {
  readonly name: 'A' | 'B';
  readonly env: Record<string, string>;
  /** The checkout Ratchet runs from (undefined: this one). */
  readonly root: string | undefined;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      a: { type: 'string', default: '' },
      b: { type: 'string', default: '' },
      workload: { type: 'string', default: 'noop' },
      concurrency: { type: 'string', default: '128' },
      rounds: { type: 'string', default: '4' },
      duration: { type: 'string', default: '6' },
      'load-generator': { type: 'string', default: 'autocannon' },
      'a-root': { type: 'string' },
      'b-root': { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  if (!(WORKLOADS as readonly string[]).includes(values.workload)) throw new Error(`unknown workload\n${USAGE}`);
  const workload = values.workload as Workload;
  const connections = Number(values.concurrency);
  const rounds = Number(values.rounds);
  const durationS = Number(values.duration);
  const generators = parseLoadGenerators(values['load-generator'], false);
  if (generators.includes('wrk')) ensureWrk((line) => process.stdout.write(`${line}\n`));
  const variants: Variant[] = [
    { name: 'A', env: parseRatchetEnv(values.a.split(/\s+/).filter(Boolean), '--a'), root: values['a-root'] },
    { name: 'B', env: parseRatchetEnv(values.b.split(/\s+/).filter(Boolean), '--b'), root: values['b-root'] },
  ];

  const load = new LoadGenerator(await forkModule('load-generator.ts', 'load generator'));
  const stack: { variant: Variant; runtime: RuntimeUnderTest; stop: () => Promise<void> }[] = [];
  try {
    for (const variant of variants) {
      const runtime = await startRatchet(variant.env, undefined, variant.root);
      const host = await startServiceHost('ratchet');
      stack.push({ variant, runtime, stop: () => host.forked.stop() });
      await register(runtime, host.url);
    }
    interface Row {
      rps: number;
      p50: number;
      cpu: number;
      /** The load generator's own CPU per invocation, ms. */
      loadCpu: number;
      /** Ratchet's group commit over the run: commits per invocation, mean commit ms, share of time committing. */
      commitsPerInv: number;
      commitMs: number;
      busy: number;
    }
    const rows = new Map<string, Row[]>();
    const loadPid = load.forked.child.pid ?? -1;
    for (let round = 0; round < rounds; round++) {
      for (const generator of round % 2 === 0 ? generators : [...generators].reverse()) {
        for (const { variant, runtime } of round % 2 === 0 ? stack : [...stack].reverse()) {
          const counters = await runtime.counters();
          const before = await runtime.cpu();
          const loadBefore = await treeCpuSeconds(loadPid);
          const started = process.hrtime.bigint();
          const stats = await load.run({ url: runtime.ingressUrl, generator, workload, connections, durationS });
          const wall = Number(process.hrtime.bigint() - started) / 1e9;
          const after = await runtime.cpu();
          const loadAfter = await treeCpuSeconds(loadPid);
          const countersAfter = await runtime.counters();
          const n = Math.max(1, stats.ok);
          const cpu = ((after.runtime - before.runtime + after.postgres - before.postgres) / n) * 1000;
          const pgCpu = ((after.postgres - before.postgres) / n) * 1000;
          const commits = (countersAfter.commits ?? 0) - (counters.commits ?? 0);
          const commitS = (countersAfter.commitSeconds ?? 0) - (counters.commitSeconds ?? 0);
          const row: Row = {
            rps: stats.rps,
            p50: stats.latencyMs.p50,
            cpu,
            loadCpu: ((loadAfter - loadBefore) / n) * 1000,
            commitsPerInv: commits / n,
            commitMs: commits === 0 ? 0 : (commitS / commits) * 1000,
            busy: commitS / wall,
          };
          const key = `${variant.name} ${generator}`;
          rows.set(key, [...(rows.get(key) ?? []), row]);
          process.stdout.write(
            `${variant.name} ${generator} round ${round}: ${stats.rps.toFixed(0)} req/s, p50 ${stats.latencyMs.p50.toFixed(2)} ms, ` +
              `${cpu.toFixed(3)} ms CPU/inv (Ratchet ${(cpu - pgCpu).toFixed(3)} + PostgreSQL ${pgCpu.toFixed(3)}), load generator ${row.loadCpu.toFixed(3)} ms/inv, ` +
              `${row.commitsPerInv.toFixed(3)} commits/inv of ${row.commitMs.toFixed(2)} ms, committer busy ` +
              `${(row.busy * 100).toFixed(0)} %, failed ${stats.non2xx + stats.errors + stats.timeouts}\n`,
          );
        }
      }
    }
    const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
    for (const generator of generators) {
      for (const v of variants) {
        const all = rows.get(`${v.name} ${generator}`) ?? [];
        const measured = all.length > 1 ? all.slice(1) : all;
        const m = (pick: (r: Row) => number): number => mean(measured.map(pick));
        process.stdout.write(
          `${v.name} ${generator} (${[
            ...(v.root === undefined ? [] : [v.root]),
            ...Object.entries(v.env).map(([k, x]) => `${k}=${x}`),
          ].join(' ')}): ${m((r) => r.rps).toFixed(0)} req/s, ` +
            `p50 ${m((r) => r.p50).toFixed(2)} ms, ${m((r) => r.cpu).toFixed(3)} ms CPU/inv, ` +
            `load generator ${m((r) => r.loadCpu).toFixed(3)} ms/inv, mean commit ${m((r) => r.commitMs).toFixed(2)} ms, ` +
            `committer busy ${(m((r) => r.busy) * 100).toFixed(0)} %\n`,
        );
      }
    }
  } finally {
    for (const s of stack) {
      await s.runtime.stop();
      await s.stop();
    }
    await load.forked.stop();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
