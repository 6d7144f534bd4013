import type { KafkaMessage } from 'kafkajs';
import type { AcceptRequest } from '../engine/types.ts';
import type { HandlerSchema, ServiceType } from '../schema/types.ts';

/** The handler a subscription's records go to, as the registry knows it now. */
export interface Sink {
  service: { name: string; ty: ServiceType };
  handler: HandlerSchema;
}

/** Where a record comes from: enough to name it uniquely within its consumer group. */
export interface RecordSource {
  subscriptionId: string;
  groupId: string;
  topic: string;
  partition: number;
}

export type RecordVerdict = { request: AcceptRequest } | { rejected: string };

const UTF8 = new TextDecoder('utf-8', { fatal: true });

function utf8(bytes: Buffer): string | undefined {
  try {
    return UTF8.decode(bytes);
  } catch {
    return undefined;
  }
}

/**
 * The idempotency key that makes a record's invocation id: the same record (group, topic, partition, offset) always
 * names the same invocation, so a redelivery after a crash, a rebalance or a restart is admitted at most once.
 */
export function recordIdempotencyKey(source: RecordSource, offset: string): string {
  return `kafka:${source.groupId}:${source.topic}:${source.partition}:${offset}`;
}

/** Headers every record's invocation carries, as restate names them; the record's own headers follow. */
const OWN_HEADERS = new Set(['restate.subscription.id', 'kafka.offset', 'kafka.partition', 'kafka.timestamp']);

/**
 * One record as the request of its invocation: the value is the input; the key is the object or workflow key of a
 * keyed sink (a record without a key, or with one that is not UTF-8, is rejected: it names no object); the record's
 * headers (UTF-8 values; the first of repeated ones) become invocation headers after restate's own
 * (`restate.subscription.id`, `kafka.offset`, `kafka.partition`, `kafka.timestamp`).
 */
export function recordToRequest(sink: Sink, source: RecordSource, message: KafkaMessage): RecordVerdict {
  const keyed = sink.service.ty !== 'Service';
  let key: string | undefined;
  if (keyed) {
    if (message.key === null || message.key === undefined) {
      return {
        rejected: `the record has no key, and ${sink.service.name} is a ${sink.service.ty === 'Workflow' ? 'workflow' : 'virtual object'}: its key names the ${sink.service.ty === 'Workflow' ? 'workflow' : 'object'}`,
      };
    }
    key = utf8(message.key);
    if (key === undefined) return { rejected: 'the record key is not valid UTF-8 (object and workflow keys are text)' };
  }
  const headers: [string, string][] = [
    ['restate.subscription.id', source.subscriptionId],
    ['kafka.offset', message.offset],
    ['kafka.partition', String(source.partition)],
    ['kafka.timestamp', message.timestamp],
  ];
  const seen = new Set(OWN_HEADERS);
  for (const [rawName, raw] of Object.entries(message.headers ?? {})) {
    const name = rawName.toLowerCase();
    if (seen.has(name) || raw === undefined) continue;
    const first = Array.isArray(raw) ? raw[0] : raw;
    if (first === undefined) continue;
    const value = typeof first === 'string' ? first : utf8(first);
    if (value === undefined) continue;
    seen.add(name);
    headers.push([name, value]);
  }
  const workflowRun = sink.service.ty === 'Workflow' && sink.handler.ty === 'Workflow';
  return {
    request: {
      service: sink.service,
      handler: sink.handler,
      key,
      body: message.value ?? Buffer.alloc(0),
      headers,
      // A workflow's run is keyed by the workflow key (a second record for the same key joins the first, as a second
      // submission through the ingress does); every other invocation by the record.
      idempotencyKey: workflowRun ? undefined : recordIdempotencyKey(source, message.offset),
      invokedBy: 'subscription',
      subscriptionId: source.subscriptionId,
    },
  };
}
