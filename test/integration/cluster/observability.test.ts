import * as restate from '@restatedev/restate-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { registerEndpoint } from '../../support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../../support/sdk-endpoint.ts';
import { waitFor } from '../../support/wait.ts';
import { startNode, waitForBalance, waitForService, type ClusterNode } from './support.ts';

/**
 * Three replicas on one database, each writing its logs and spans to the cluster's store: an invocation that starts on
 * one node, suspends, and finishes on another after the first is SIGKILLed is one trace and one set of log streams,
 * and every node answers the same Loki and Tempo queries about it.
 */
const PARTITIONS = 6;

const napper = restate.service({
  name: 'Napper',
  handlers: {
    run: async (ctx: restate.Context, ms: number) => {
      await ctx.run('before', () => 'a');
      await ctx.sleep(ms);
      return ctx.run('after', () => 'b');
    },
  },
});

interface LokiStreams {
  data: { result: { stream: Record<string, string>; values: [string, string][] }[] };
}

interface TempoTrace {
  batches: {
    resource: { attributes: { key: string; value: { stringValue?: string } }[] };
    scopeSpans: { spans: { name: string; traceId: string }[] }[];
  }[];
}

describe('observability across three replicas', () => {
  let db: TestDatabase;
  let endpoint: SdkEndpoint;
  const nodes = new Map<string, ClusterNode>();
  const env = {
    RATCHET_PARTITIONS: String(PARTITIONS),
    RATCHET_OBSERVABILITY_LOG_LEVEL: 'debug',
    RATCHET_CLUSTER_NAME: 'obs3',
    // The attempt ends (and the invocation suspends) soon after the handler waits on its sleep.
    RATCHET_INVOKER_INACTIVITY_TIMEOUT: '200ms',
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    endpoint = await startEndpoint({ services: [napper], transport: 'h2' });
    for (const name of ['obs-a', 'obs-b', 'obs-c']) nodes.set(name, await startNode(db.url, name, env));
    const a = nodes.get('obs-a')!;
    await registerEndpoint(a.process, endpoint);
    for (const n of nodes.values()) await waitForService(n, 'Napper');
    await waitForBalance(a, [...nodes.keys()], PARTITIONS);
  });

  afterAll(async () => {
    for (const n of nodes.values()) await n.process.stop();
    await endpoint?.close();
    await db?.drop();
  });

  const output = (): string => [...nodes.values()].map((n) => `--- ${n.name}\n${n.process.output()}`).join('\n');

  const linesOf = async (node: ClusterNode, id: string): Promise<{ node: string; event: string }[]> => {
    const params = new URLSearchParams({ query: `{service_name="Napper"} |= "${id}"`, limit: '1000' });
    const res = await fetch(`${node.process.observabilityUrl}/loki/api/v1/query_range?${params.toString()}`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as LokiStreams;
    return body.data.result
      .flatMap((s) =>
        s.values.map(([ts, line]) => ({
          ts: BigInt(ts),
          node: s.stream['node']!,
          event: String((JSON.parse(line) as { fields: Record<string, unknown> }).fields['restate.invocation.event']),
        })),
      )
      .sort((x, y) => (x.ts < y.ts ? -1 : x.ts > y.ts ? 1 : 0))
      .map(({ node, event }) => ({ node, event }));
  };

  it('keeps an invocation that moved between nodes in one trace and one stream set, readable from any node', async () => {
    const a = nodes.get('obs-a')!;
    const res = await fetch(`${a.process.ingressUrl}/Napper/run/send`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent: `00-${'ab'.repeat(16)}-${'cd'.repeat(8)}-01` },
      body: '4000',
    });
    expect(res.status).toBe(202);
    const { invocationId: id } = (await res.json()) as { invocationId: string };

    // Where its first attempt ran, once that node has stored the suspension.
    let first = '';
    await waitFor(async () => {
      const lines = await linesOf(a, id);
      const suspended = lines.find((l) => l.event === 'suspended');
      expect(suspended, output()).toBeDefined();
      first = suspended!.node;
    }, 20_000);
    const owner = nodes.get(first)!;
    await owner.process.kill('SIGKILL');
    nodes.delete(first);

    // Another node takes the partition over, fires the timer and finishes the invocation.
    const survivors = [...nodes.values()];
    await waitFor(async () => {
      const lines = await linesOf(survivors[0]!, id);
      expect(lines.map((l) => l.event)).toContain('completed');
    }, 30_000);

    for (const node of survivors) {
      const lines = await linesOf(node, id);
      const events = lines.map((l) => l.event);
      expect(events.slice(0, 2), node.name).toEqual(['accepted', 'started']);
      expect(events, node.name).toContain('suspended');
      expect(events.at(-1), node.name).toBe('completed');
      // The lines came from the first node and from the one that finished it, each under its own `node` label.
      const finisher = lines.at(-1)!.node;
      expect(finisher).not.toBe(first);
      expect(new Set(lines.map((l) => l.node))).toEqual(new Set([first, finisher]));

      // One trace, the client's, with spans from both nodes (their resources name them).
      const res = await fetch(`${node.process.observabilityUrl}/api/traces/${'ab'.repeat(16)}`);
      expect(res.status).toBe(200);
      const trace = (await res.json()) as TempoTrace;
      const spans = trace.batches.flatMap((b) =>
        b.scopeSpans.flatMap((s) =>
          s.spans.map((sp) => ({
            name: sp.name,
            instance: b.resource.attributes.find((x) => x.key === 'service.instance.id')?.value.stringValue,
          })),
        ),
      );
      const attempts = spans.filter((s) => s.name.startsWith('invocation-attempt'));
      expect(attempts.length).toBeGreaterThanOrEqual(2);
      expect(new Set(attempts.map((s) => s.instance))).toEqual(new Set([`obs3/${first}`, `obs3/${finisher}`]));
      expect(spans.map((s) => s.name)).toContain('invocation-end Napper/run');

      // Found by invocation id through Tempo's search as well.
      const params = new URLSearchParams({ tags: `restate.invocation.id=${id}` });
      const search = await fetch(`${node.process.observabilityUrl}/api/search?${params.toString()}`);
      const found = (await search.json()) as { traces: { traceID: string }[] };
      expect(found.traces.map((t) => t.traceID)).toEqual(['ab'.repeat(16)]);
    }
  });
});
