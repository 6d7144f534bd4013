/**
 * Cross-checks against what restate-server 1.7.12 actually produced in the golden captures
 * (shared/golden, beside the repository).
 */

import { readFileSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';

import { describe, expect, it } from 'vitest';

import { parseAwakeableId } from '../../../runtime/src/ids/awakeable-id.ts';
import { InvocationId } from '../../../runtime/src/ids/invocation-id.ts';
import { partitionKeyForKey } from '../../../runtime/src/ids/partition-key.ts';

const GOLDEN = resolve(import.meta.dirname, '../../../../shared/golden');
const SERVER_SCENARIOS = ['h1-v6', 'h1-v7', 'h2-v6', 'h2-v7'];

interface Frame {
  name: string;
  body: Record<string, unknown>;
}
interface Exchange {
  exchange?: { requestHeaders?: Record<string, string> };
  frames?: Frame[];
}
interface StartInfo {
  file: string;
  hex: string;
  debugId: string;
  key: string | undefined;
  header: string | undefined;
}

function starts(dir: string): StartInfo[] {
  const out: StartInfo[] = [];
  for (const file of readdirSync(join(GOLDEN, dir))
    .filter((f) => f.endsWith('.decoded.json'))
    .sort()) {
    const ex = JSON.parse(readFileSync(join(GOLDEN, dir, file), 'utf8')) as Exchange;
    for (const frame of ex.frames ?? []) {
      if (frame.name !== 'Start') continue;
      const body = frame.body as { id: { hex: string }; debug_id: string; key?: string };
      out.push({
        file: `${dir}/${file}`,
        hex: body.id.hex,
        debugId: body.debug_id,
        key: body.key,
        header: ex.exchange?.requestHeaders?.['x-restate-invocation-id'],
      });
    }
  }
  return out;
}

function sysInvocations(scenario: string): { id: string; target: string }[] {
  return JSON.parse(readFileSync(join(GOLDEN, 'scenario-logs', `${scenario}-sys_invocation.json`), 'utf8')) as {
    id: string;
    target: string;
  }[];
}

describe('golden captures', () => {
  it.each([...SERVER_SCENARIOS, 'sdk-probes'])('%s: every Start frame raw id encodes to its debug_id', (dir) => {
    const all = starts(dir);
    expect(all.length).toBeGreaterThan(10);
    for (const s of all) {
      expect(InvocationId.fromRaw(Buffer.from(s.hex, 'hex')), s.file).toBe(s.debugId);
      expect(Buffer.from(InvocationId.toRaw(InvocationId.parse(s.debugId))).toString('hex'), s.file).toBe(s.hex);
      if (s.header !== undefined) expect(s.header, s.file).toBe(s.debugId);
    }
  });

  it.each(SERVER_SCENARIOS)('%s: keyed Start frames sit on partition key H(key)', (dir) => {
    const keyed = starts(dir).filter((s) => s.key !== undefined && s.key !== '');
    expect(keyed.length).toBeGreaterThan(5);
    for (const s of keyed) {
      expect(InvocationId.partitionKey(InvocationId.parse(s.debugId)), s.file).toBe(partitionKeyForKey(s.key!));
    }
  });

  it.each(SERVER_SCENARIOS)('%s: sys_invocation ids parse and keyed ones share the key prefix', (scenario) => {
    const rows = sysInvocations(scenario);
    const prefixByKey = new Map<string, string>();
    for (const { id, target } of rows) {
      const parsed = InvocationId.parse(id);
      const parts = target.split('/');
      if (parts.length !== 3) continue;
      const [service, key] = parts as [string, string, string];
      expect(InvocationId.partitionKey(parsed), target).toBe(partitionKeyForKey(key));
      const objectKey = `${service}/${key}`;
      const prefix = prefixByKey.get(objectKey) ?? id.slice(0, 16);
      prefixByKey.set(objectKey, prefix);
      expect(id.slice(0, 16), target).toBe(prefix);
    }
    expect(prefixByKey.size).toBeGreaterThanOrEqual(3);
  });

  it.each(SERVER_SCENARIOS)('%s: deterministic ids match our derivation', (scenario) => {
    const rows = sysInvocations(scenario);
    const run = rows.find((r) => r.target === 'Signup/wf1/run');
    expect(run?.id).toBe(InvocationId.forWorkflow('Signup', 'wf1'));
    // Probes/idempotentCall calls Counter/k/add with idempotency key idem-1
    const counterK = rows.filter((r) => r.target === 'Counter/k/add').map((r) => r.id);
    expect(counterK).toContain(InvocationId.forIdempotent('Counter', 'k', 'add', 'idem-1'));
  });

  it.each(SERVER_SCENARIOS)('%s: awakeable ids point at the invocation that created them', (dir) => {
    const ids = new Set(starts(dir).map((s) => s.debugId));
    const found = new Set<string>();
    for (const file of readdirSync(join(GOLDEN, dir)).filter((f) => f.endsWith('.decoded.json'))) {
      for (const m of readFileSync(join(GOLDEN, dir, file), 'utf8').matchAll(/(?:sign|prom)_1[A-Za-z0-9_=-]+/g)) {
        found.add(m[0]);
      }
    }
    expect(found.size).toBeGreaterThan(0);
    for (const s of found) {
      const a = parseAwakeableId(s);
      expect(a.kind).toBe('signal');
      expect(a.index).toBe(17);
      expect(ids.has(a.invocationId), s).toBe(true);
    }
  });
});
