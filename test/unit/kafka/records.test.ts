import type { IHeaders, KafkaMessage } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import type { AcceptRequest } from '../../../runtime/src/engine/types.ts';
import {
  recordIdempotencyKey,
  recordToRequest,
  type RecordSource,
  type RecordVerdict,
  type Sink,
} from '../../../runtime/src/kafka/records.ts';
import type { HandlerSchema, HandlerType, ServiceType } from '../../../runtime/src/schema/types.ts';

function handler(name: string, ty?: HandlerType): HandlerSchema {
  const h: HandlerSchema = {
    name,
    input: { required: false },
    output: { setContentTypeIfEmpty: false },
    retryPolicy: {},
  };
  if (ty !== undefined) h.ty = ty;
  return h;
}

function sink(ty: ServiceType, handlerTy?: HandlerType, handlerName = 'handle'): Sink {
  return { service: { name: 'Orders', ty }, handler: handler(handlerName, handlerTy) };
}

const SOURCE: RecordSource = { subscriptionId: 'sub_1', groupId: 'group-a', topic: 'orders', partition: 3 };

function message(fields: { key?: Buffer | null; value?: Buffer | null; headers?: IHeaders; offset?: string } = {}) {
  return {
    key: fields.key === undefined ? Buffer.from('k1') : fields.key,
    value: fields.value === undefined ? Buffer.from('{"a":1}') : fields.value,
    timestamp: '1700000000000',
    attributes: 0,
    offset: fields.offset ?? '42',
    headers: fields.headers ?? {},
    size: 0,
  } as unknown as KafkaMessage;
}

function accepted(verdict: RecordVerdict): AcceptRequest {
  if (!('request' in verdict)) throw new Error(`expected a request, got rejection: ${verdict.rejected}`);
  return verdict.request;
}

function rejected(verdict: RecordVerdict): string {
  if (!('rejected' in verdict)) throw new Error('expected a rejection, got a request');
  return verdict.rejected;
}

const OWN = [
  ['restate.subscription.id', 'sub_1'],
  ['kafka.offset', '42'],
  ['kafka.partition', '3'],
  ['kafka.timestamp', '1700000000000'],
];

describe('recordIdempotencyKey', () => {
  it('names group, topic, partition and offset', () => {
    expect(recordIdempotencyKey(SOURCE, '42')).toBe('kafka:group-a:orders:3:42');
  });

  it('differs for each part of the record name', () => {
    const base = recordIdempotencyKey(SOURCE, '42');
    expect(recordIdempotencyKey(SOURCE, '43')).not.toBe(base);
    expect(recordIdempotencyKey({ ...SOURCE, partition: 4 }, '42')).not.toBe(base);
    expect(recordIdempotencyKey({ ...SOURCE, topic: 'other' }, '42')).not.toBe(base);
    expect(recordIdempotencyKey({ ...SOURCE, groupId: 'group-b' }, '42')).not.toBe(base);
  });

  it('does not depend on the subscription id', () => {
    expect(recordIdempotencyKey({ ...SOURCE, subscriptionId: 'sub_2' }, '42')).toBe('kafka:group-a:orders:3:42');
  });
});

describe('recordToRequest: keys', () => {
  it('a Service sink takes a record with a key, without passing the key on', () => {
    const r = accepted(recordToRequest(sink('Service'), SOURCE, message({ key: Buffer.from('abc') })));
    expect(r.key).toBeUndefined();
  });

  it('a Service sink takes a record without a key', () => {
    const r = accepted(recordToRequest(sink('Service'), SOURCE, message({ key: null })));
    expect(r.key).toBeUndefined();
  });

  it('a Service sink takes a record with a non-UTF-8 key', () => {
    const r = accepted(recordToRequest(sink('Service'), SOURCE, message({ key: Buffer.from([0xff, 0xfe]) })));
    expect(r.key).toBeUndefined();
  });

  it.each<[ServiceType, string]>([
    ['VirtualObject', 'virtual object'],
    ['Workflow', 'workflow'],
  ])('a %s sink rejects a record without a key', (ty, noun) => {
    const reason = rejected(
      recordToRequest(sink(ty, ty === 'Workflow' ? 'Workflow' : 'Exclusive'), SOURCE, message({ key: null })),
    );
    expect(reason).toContain('has no key');
    expect(reason).toContain('Orders');
    expect(reason).toContain(noun);
  });

  it.each<ServiceType>(['VirtualObject', 'Workflow'])('a %s sink rejects an undefined key', (ty) => {
    const m = { ...message(), key: undefined } as unknown as KafkaMessage;
    expect(rejected(recordToRequest(sink(ty), SOURCE, m))).toContain('has no key');
  });

  it.each<ServiceType>(['VirtualObject', 'Workflow'])('a %s sink rejects a non-UTF-8 key', (ty) => {
    const reason = rejected(recordToRequest(sink(ty), SOURCE, message({ key: Buffer.from([0xff, 0xfe]) })));
    expect(reason).toContain('not valid UTF-8');
  });

  it.each<ServiceType>(['VirtualObject', 'Workflow'])('a %s sink passes a UTF-8 key as the key', (ty) => {
    const r = accepted(recordToRequest(sink(ty), SOURCE, message({ key: Buffer.from('clé-🔑', 'utf8') })));
    expect(r.key).toBe('clé-🔑');
  });

  it('a keyed sink takes an empty key as the empty string', () => {
    const r = accepted(recordToRequest(sink('VirtualObject'), SOURCE, message({ key: Buffer.alloc(0) })));
    expect(r.key).toBe('');
  });
});

describe('recordToRequest: headers', () => {
  it("puts restate's own headers first", () => {
    const r = accepted(recordToRequest(sink('Service'), SOURCE, message()));
    expect(r.headers).toEqual(OWN);
  });

  it('uses the record offset and timestamp and the source partition', () => {
    const m: KafkaMessage = { ...message(), offset: '1000000000001', timestamp: '1' };
    const r = accepted(recordToRequest(sink('Service'), { ...SOURCE, partition: 0 }, m));
    expect(r.headers.slice(0, 4)).toEqual([
      ['restate.subscription.id', 'sub_1'],
      ['kafka.offset', '1000000000001'],
      ['kafka.partition', '0'],
      ['kafka.timestamp', '1'],
    ]);
  });

  it('appends the record headers after, lowercased, in order', () => {
    const r = accepted(
      recordToRequest(
        sink('Service'),
        SOURCE,
        message({ headers: { 'X-Trace': 'abc', 'Content-Type': 'application/json', lower: 'v' } }),
      ),
    );
    expect(r.headers).toEqual([...OWN, ['x-trace', 'abc'], ['content-type', 'application/json'], ['lower', 'v']]);
  });

  it('drops record headers that collide with its own, whatever their case', () => {
    const r = accepted(
      recordToRequest(
        sink('Service'),
        SOURCE,
        message({
          headers: {
            'kafka.offset': '999',
            'KAFKA.PARTITION': '7',
            'Restate.Subscription.Id': 'sub_evil',
            'kafka.timestamp': Buffer.from('0'),
            'x-ok': 'yes',
          },
        }),
      ),
    );
    expect(r.headers).toEqual([...OWN, ['x-ok', 'yes']]);
  });

  it('keeps the first of headers whose names differ only in case', () => {
    const r = accepted(
      recordToRequest(sink('Service'), SOURCE, message({ headers: { 'X-A': 'first', 'x-a': 'second' } })),
    );
    expect(r.headers).toEqual([...OWN, ['x-a', 'first']]);
  });

  it('takes the first value of a repeated header', () => {
    const r = accepted(
      recordToRequest(
        sink('Service'),
        SOURCE,
        message({ headers: { multi: ['one', 'two'], bufs: [Buffer.from('b1'), Buffer.from('b2')] } }),
      ),
    );
    expect(r.headers).toEqual([...OWN, ['multi', 'one'], ['bufs', 'b1']]);
  });

  it('decodes Buffer values as UTF-8', () => {
    const r = accepted(
      recordToRequest(sink('Service'), SOURCE, message({ headers: { 'x-buf': Buffer.from('héllo', 'utf8') } })),
    );
    expect(r.headers).toEqual([...OWN, ['x-buf', 'héllo']]);
  });

  it('skips non-UTF-8 header values', () => {
    const r = accepted(
      recordToRequest(
        sink('Service'),
        SOURCE,
        message({ headers: { bad: Buffer.from([0xff, 0xfe]), badArr: [Buffer.from([0xc3])], good: 'g' } }),
      ),
    );
    expect(r.headers).toEqual([...OWN, ['good', 'g']]);
  });

  it('uses a later same-named header when the first is skipped', () => {
    const r = accepted(
      recordToRequest(sink('Service'), SOURCE, message({ headers: { 'X-A': Buffer.from([0xff]), 'x-a': 'later' } })),
    );
    expect(r.headers).toEqual([...OWN, ['x-a', 'later']]);
  });

  it('skips undefined values and empty arrays', () => {
    const r = accepted(
      recordToRequest(sink('Service'), SOURCE, message({ headers: { gone: undefined, empty: [], kept: '' } })),
    );
    expect(r.headers).toEqual([...OWN, ['kept', '']]);
  });

  it('works for a message without headers (message set entry)', () => {
    const m = { ...message(), headers: undefined } as unknown as KafkaMessage;
    expect(accepted(recordToRequest(sink('Service'), SOURCE, m)).headers).toEqual(OWN);
  });
});

describe('recordToRequest: body', () => {
  it('is the record value', () => {
    const value = Buffer.from([0x00, 0x01, 0xff]);
    const r = accepted(recordToRequest(sink('Service'), SOURCE, message({ value })));
    expect(Buffer.from(r.body)).toEqual(value);
  });

  it('is empty for a null value (a tombstone)', () => {
    const r = accepted(recordToRequest(sink('VirtualObject'), SOURCE, message({ value: null })));
    expect(r.body).toBeInstanceOf(Uint8Array);
    expect(r.body.length).toBe(0);
  });
});

describe('recordToRequest: invocation', () => {
  it('names the sink service and handler', () => {
    const s = sink('VirtualObject', 'Exclusive');
    const r = accepted(recordToRequest(s, SOURCE, message()));
    expect(r.service).toEqual({ name: 'Orders', ty: 'VirtualObject' });
    expect(r.handler).toBe(s.handler);
  });

  it('is invoked by the subscription', () => {
    const r = accepted(recordToRequest(sink('Service'), SOURCE, message()));
    expect(r.invokedBy).toBe('subscription');
    expect(r.subscriptionId).toBe('sub_1');
    expect(r.delayMs).toBeUndefined();
  });

  it.each<[ServiceType, HandlerType | undefined]>([
    ['Service', undefined],
    ['VirtualObject', 'Exclusive'],
    ['VirtualObject', 'Shared'],
    ['VirtualObject', undefined],
    ['Workflow', 'Shared'],
  ])('a %s sink (handler %s) gets the record idempotency key', (ty, handlerTy) => {
    const r = accepted(recordToRequest(sink(ty, handlerTy), SOURCE, message({ offset: '77' })));
    expect(r.idempotencyKey).toBe('kafka:group-a:orders:3:77');
    expect(r.idempotencyKey).toBe(recordIdempotencyKey(SOURCE, '77'));
  });

  it("a workflow's run handler gets no idempotency key (the workflow key names it)", () => {
    const r = accepted(
      recordToRequest(sink('Workflow', 'Workflow', 'run'), SOURCE, message({ key: Buffer.from('wf-1') })),
    );
    expect(r.idempotencyKey).toBeUndefined();
    expect(r.key).toBe('wf-1');
    expect(r.invokedBy).toBe('subscription');
    expect(r.subscriptionId).toBe('sub_1');
  });

  it('the same record always gets the same request', () => {
    const s = sink('VirtualObject', 'Exclusive');
    const a = accepted(recordToRequest(s, SOURCE, message({ headers: { h: 'v' } })));
    const b = accepted(recordToRequest(s, SOURCE, message({ headers: { h: 'v' } })));
    expect(a).toEqual(b);
  });
});
