import { parseArgs } from 'node:util';
import { forkModule, LoadGenerator, startServiceHost } from './children.ts';
import { register, startRatchet, type RuntimeUnderTest } from './runtimes.ts';
import { parseRatchetEnv } from './settings.ts';
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
    const rows: Record<'A' | 'B', { rps: number; p50: number; cpu: number }[]> = { A: [], B: [] };
    for (let round = 0; round < rounds; round++) {
      for (const { variant, runtime } of round % 2 === 0 ? stack : [...stack].reverse()) {
        const before = await runtime.cpu();
        const stats = await load.run({ url: runtime.ingressUrl, workload, connections, durationS });
        const after = await runtime.cpu();
        const cpu = ((after.runtime - before.runtime + after.postgres - before.postgres) / stats.ok) * 1000;
        rows[variant.name].push({ rps: stats.rps, p50: stats.latencyMs.p50, cpu });
        process.stdout.write(
          `${variant.name} round ${round}: ${stats.rps.toFixed(0)} req/s, p50 ${stats.latencyMs.p50.toFixed(2)} ms, ` +
            `${cpu.toFixed(3)} ms CPU/inv (Ratchet + PostgreSQL), failed ${stats.non2xx + stats.errors + stats.timeouts}\n`,
        );
      }
    }
    const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
    for (const v of variants) {
      const measured = rows[v.name].length > 1 ? rows[v.name].slice(1) : rows[v.name];
      process.stdout.write(
        `${v.name} (${[
          ...(v.root === undefined ? [] : [v.root]),
          ...Object.entries(v.env).map(([k, x]) => `${k}=${x}`),
        ].join(' ')}): ${mean(measured.map((r) => r.rps)).toFixed(0)} req/s, ` +
          `p50 ${mean(measured.map((r) => r.p50)).toFixed(2)} ms, ${mean(measured.map((r) => r.cpu)).toFixed(3)} ms CPU/inv\n`,
      );
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
