import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as restate from '@restatedev/restate-sdk';
import pg from 'pg';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MessageType } from '../../../runtime/src/protocol/message-types.ts';
import { startEmbeddedDatabase, type EmbeddedDatabase } from '../../../runtime/src/storage/pg/embedded.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { counter } from '../../support/services/counter.ts';
import { waitFor } from '../../support/wait.ts';
import { CounterLoad, checkCounters, ownership, startNode, type ClusterNode } from './support.ts';

/**
 * Chaos: for a bounded time, random SIGKILLs and SIGTERMs of runtime nodes (each restarted afterwards) and restarts of
 * PostgreSQL, under load from idempotency-keyed clients that retry. At the end nothing acknowledged is lost, no update
 * is applied twice, no side effect ran again after its result was journaled, and no node logged an unexpected error.
 */

/** When each `ctx.run` side effect started, per invocation. */
const effects = new Map<string, number[]>();

const once = restate.service({
  name: 'Once',
  handlers: {
    run: async (ctx: restate.Context, tag: string): Promise<string> => {
      const id = ctx.request().id;
      await ctx.run('effect', () => {
        effects.set(id, [...(effects.get(id) ?? []), Date.now()]);
      });
      await ctx.sleep(50);
      return tag;
    },
  },
});

const PARTITIONS = 12;
const DURATION_MS = 25_000;
const NAMES = ['chaos-a', 'chaos-b', 'chaos-c'];

function pick<T>(items: readonly T[]): T {
  return items[Math.floor(Math.random() * items.length)]!;
}

describe('chaos: nodes and PostgreSQL killed and restarted under load', () => {
  let dir: string;
  let db: EmbeddedDatabase;
  let endpoint: SdkEndpoint;
  const nodes = new Map<string, ClusterNode>();
  const env = { RATCHET_PARTITIONS: String(PARTITIONS), RATCHET_SHUTDOWN_DELAY: '300ms' };
  const outputs: string[] = [];

  beforeAll(async () => {
    dir = await mkdtemp(join(process.getuid?.() === 0 ? '/tmp' : tmpdir(), 'ratchet-chaos-'));
    await chmod(dir, 0o755);
    db = await startEmbeddedDatabase(dir, pino({ level: 'silent' }), { restart: true });
    endpoint = await startEndpoint({ services: [counter, once], transport: 'h2' });
    for (const name of NAMES) nodes.set(name, await startNode(db.url, name, env));
    await registerEndpoint(nodes.get(NAMES[0]!)!.process, endpoint);
    for (const n of nodes.values()) {
      await waitFor(async () => expect((await fetch(`${n.process.adminUrl}/services/Once`)).status).toBe(200));
    }
  });

  afterAll(async () => {
    for (const n of nodes.values()) await n.process.stop();
    await endpoint?.close();
    await db?.stop();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('loses nothing, duplicates nothing and logs no unexpected error', async () => {
    const live = (): ClusterNode[] => [...nodes.values()];
    const counters = new CounterLoad(
      () => live().map((n) => n.process.ingressUrl),
      Array.from({ length: 12 }, (_, i) => `chaos-k${i}`),
      6,
      'chaos',
    );
    // Calls of Once/run, each with its own idempotency key, retried until answered.
    let stopping = false;
    const onceAnswered = new Map<string, string>();
    let onceRequests = 0;
    const onceWorker = async (w: number): Promise<void> => {
      for (let i = 0; !stopping; i++) {
        const tag = `once-${w}-${i}`;
        onceRequests += 1;
        for (;;) {
          const targets = live();
          const target = targets[(i + w) % Math.max(1, targets.length)];
          try {
            if (target === undefined) throw new Error('no node');
            const res = await fetch(`${target.process.ingressUrl}/Once/run`, {
              method: 'POST',
              headers: { 'content-type': 'application/json', 'idempotency-key': tag },
              body: JSON.stringify(tag),
              signal: AbortSignal.timeout(30_000),
            });
            const text = await res.text();
            if (res.status === 200) {
              onceAnswered.set(tag, res.headers.get('x-restate-id') ?? '');
              expect(text).toBe(JSON.stringify(tag));
              break;
            }
          } catch {
            // retried below
          }
          await new Promise((r) => setTimeout(r, 150));
        }
      }
    };
    const onceWorkers = [0, 1, 2].map((w) => onceWorker(w));

    const actions: string[] = [];
    const recoveries: number[] = [];
    const started = Date.now();
    let step = 0;
    while (Date.now() - started < DURATION_MS) {
      await new Promise((r) => setTimeout(r, 2000 + Math.random() * 1500));
      // Every kind of fault comes up (in this order, round and round); victims are random.
      const action = (['postgres', 'term', 'kill'] as const)[step++ % 3]!;
      if (action === 'postgres') {
        actions.push('SIGKILL postgres');
        process.kill(db.pid, 'SIGKILL');
        continue;
      }
      const victim = pick([...nodes.values()]);
      const ports = victim.process.ports;
      const survivors = [...nodes.values()].filter((n) => n !== victim);
      nodes.delete(victim.name);
      const signal = action === 'kill' ? 'SIGKILL' : 'SIGTERM';
      const at = Date.now();
      process.kill(victim.process.pid, signal);
      // Time until every partition has a live owner again, as a survivor sees it (a SIGTERMed node hands over at
      // once, and keeps draining its requests in flight for a while after that).
      let recovered = '';
      try {
        await waitFor(async () => {
          const owned = await ownership(survivors[0]!);
          const alive = new Set(survivors.map((s) => s.name));
          const all = [...owned].filter(([name]) => alive.has(name)).flatMap(([, p]) => p);
          expect(new Set(all).size).toBe(PARTITIONS);
        }, 30_000);
        recoveries.push(Date.now() - at);
        recovered = `owned again after ${Date.now() - at} ms`;
      } catch (err) {
        recovered = `NO OWNERS after ${Date.now() - at} ms: ${(err as Error).message}`;
      }
      await victim.process.exited;
      actions.push(`${signal} ${victim.name} (${recovered}, exited after ${Date.now() - at} ms)`);
      outputs.push(`--- ${victim.name} (until ${signal})\n${victim.process.output()}`);
      nodes.set(victim.name, await startNode(db.url, victim.name, env, ports));
    }
    stopping = true;
    const report = await counters.stop();
    await Promise.all(onceWorkers);

    const first = [...nodes.values()][0]!;
    const total = await checkCounters(first.process.ingressUrl, report);
    expect(total).toBe(report.requests);
    expect(onceAnswered.size).toBe(onceRequests);

    // No side effect started again after its result was journaled.
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    let reran = 0;
    let duplicatedBeforeCommit = 0;
    try {
      const rows = await client.query<{ invocation_id: string; appended_at: Date }>(
        `SELECT invocation_id, appended_at FROM ratchet.journal WHERE entry_type = $1 AND invocation_id = ANY($2::text[])`,
        [MessageType.RunCompletionNotification, [...onceAnswered.values()]],
      );
      const journaled = new Map(rows.rows.map((r) => [r.invocation_id, r.appended_at.getTime()]));
      for (const id of onceAnswered.values()) {
        const at = journaled.get(id);
        expect(at, `run result of ${id} journaled`).toBeDefined();
        const runs = effects.get(id) ?? [];
        reran += runs.filter((t) => t > at!).length;
        if (runs.length > 1) duplicatedBeforeCommit += 1;
      }
    } finally {
      await client.end();
    }

    const logs = [...outputs, ...[...nodes.values()].map((n) => `--- ${n.name}\n${n.process.output()}`)].join('\n');
    const unexpected = logs
      .split('\n')
      .filter((l) => /"level":"(error|fatal)"|unhandled promise rejection|uncaughtException/.test(l))
      .slice(0, 10);
    console.log(
      `chaos for ${DURATION_MS / 1000} s: ${actions.join(', ')}\n` +
        `recovery (every partition owned again) after node kills/terms: ${recoveries.map((ms) => `${ms} ms`).join(', ')}\n` +
        `counter updates: ${report.requests} sent, ${total} acknowledged, lost 0, duplicates 0; ` +
        `Once calls: ${onceRequests} sent, ${onceAnswered.size} answered; side effects run again after their result ` +
        `was journaled: ${reran}; run twice because the first result was never journaled (allowed): ${duplicatedBeforeCommit}`,
    );
    expect(reran).toBe(0);
    expect(unexpected).toEqual([]);
    expect(Math.max(0, ...recoveries)).toBeLessThan(15_000);
  }, 180_000);
});
