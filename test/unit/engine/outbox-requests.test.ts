import { describe, expect, it } from 'vitest';
import { decodeNewInvocation, encodeNewInvocation } from '../../../runtime/src/engine/outbox-requests.ts';
import type { NewInvocation } from '../../../runtime/src/storage/rows.ts';

/** A new invocation travels between nodes as JSON in an outbox request; the owner admits what the caller built. */
describe('outbox requests: a new invocation as JSON', () => {
  const row: NewInvocation = {
    id: 'inv_1abc',
    partitionKey: 18_446_744_073_709_551_615n,
    partitionId: 7,
    serviceName: 'Counter',
    serviceKey: 'k1',
    handlerName: 'add',
    serviceTy: 'virtual_object',
    handlerTy: 'exclusive',
    status: 'scheduled',
    idempotencyKey: 'idem',
    invokedBy: 'service',
    invokedById: 'inv_caller',
    invokedByTarget: 'Caller/run',
    randomSeed: 12_345_678_901_234_567_890n,
    journalLength: 1,
    inboxSeq: false,
    createdAt: new Date('2026-11-25T10:00:00.123Z'),
    scheduledStartAt: new Date('2026-11-26T10:00:00.000Z'),
    completionRetentionMs: 86_400_000,
    journalRetentionMs: null,
    traceContext: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
  };

  it('decodes what it encodes, u64 and timestamps exactly, through a JSON round trip', () => {
    const wire = JSON.parse(JSON.stringify(encodeNewInvocation(row))) as Record<string, unknown>;
    expect(decodeNewInvocation(wire)).toEqual(row);
  });

  it('keeps absent optional fields absent (no trace context, not scheduled)', () => {
    const plain: NewInvocation = { ...row, status: 'invoked', scheduledStartAt: null, serviceKey: null };
    delete plain.traceContext;
    const back = decodeNewInvocation(JSON.parse(JSON.stringify(encodeNewInvocation(plain))) as Record<string, unknown>);
    expect(back).toEqual({ ...plain, traceContext: null });
  });

  it('refuses a request whose fields have the wrong types', () => {
    const wire = { ...(JSON.parse(JSON.stringify(encodeNewInvocation(row))) as Record<string, unknown>) };
    expect(() => decodeNewInvocation({ ...wire, status: 'completed' })).toThrow(/bad status/);
    expect(() => decodeNewInvocation({ ...wire, serviceName: 3 })).toThrow(/serviceName is not a string/);
  });
});
