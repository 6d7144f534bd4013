import pino from 'pino';
import { observers } from '../runtime/src/engine/observer.ts';
import type { LineChunk, SpanChunk } from '../runtime/src/observability/chunks.ts';
import { InvocationLog } from '../runtime/src/observability/invocation-log.ts';
import { LogCapture } from '../runtime/src/observability/log-capture.ts';
import { IngressTracer } from '../runtime/src/observability/tracing/ingress-tracer.ts';
import { InvocationTracer } from '../runtime/src/observability/tracing/invocation-tracer.ts';
import { RecordingTracer } from '../runtime/src/observability/tracing/recording-tracer.ts';
import { ObservabilityWriter } from '../runtime/src/observability/writer.ts';

/**
 * `npx tsx bench/observability-path.ts`: what the observability store costs Node per invocation, in isolation — the
 * ingress span, the invocation's trace, its `accepted`, `started` and `completed` events through the lifecycle log and
 * the tracer, and the writer's chunks — with a store that only counts the bytes it is given. The runtime's share of
 * the store's cost on a real workload is `npm run bench:ab` (bench/README.md, session 13).
 */

const logger = pino({ level: 'info' }, pino.destination('/dev/null'));
let bytes = 0;
const store = {
  insertLogs(chunks: readonly LineChunk[]): Promise<void> {
    for (const c of chunks) bytes += c.lines.length + c.times.length + (c.dict?.length ?? 0);
    return Promise.resolve();
  },
  insertSpans(chunks: readonly SpanChunk[]): Promise<void> {
    for (const c of chunks) bytes += c.spans.length + (c.dict?.length ?? 0);
    return Promise.resolve();
  },
};
const writer = new ObservabilityWriter(store, logger, { maxBuffered: 50_000, maxBatch: 2000, flushIntervalMs: 1e9 });
const capture = new LogCapture();
capture.attach(writer, { node: 'n1', cluster: 'c' });
const resource = { 'service.name': 'Ratchet', 'service.version': '0', 'service.instance.id': 'c/n1' };
const tracer = new RecordingTracer(writer, resource, 'services');
const observer = observers(
  new InvocationLog(logger, { capture, stdout: (l) => l !== 'debug', store: () => true }),
  new InvocationTracer(tracer),
);
const ingress = new IngressTracer(tracer);

function invocation(i: number): void {
  const id = `inv_1gdJBtdVEcM942bjcDmb1c1kh${String(i).padStart(9, '0')}`;
  const span = ingress.start({
    service: 'Noop',
    handler: 'noop',
    key: undefined,
    headers: {},
    remoteAddress: '127.0.0.1',
    remotePort: 50_000 + (i % 1000),
  });
  const req = { id, target: 'Noop/noop', service: 'Noop', handler: 'noop', key: null };
  const traceContext = observer.newTrace!({ ...req, parent: span.traceContext, caller: undefined }) ?? null;
  const inv = { ...req, deploymentId: 'dp_11SEqaxbnkPYrT2kmAT9tMY', attempt: 0, partition: i % 24, traceContext };
  observer.event(inv, { kind: 'accepted', idempotencyKey: null });
  observer.event(inv, { kind: 'started', protocolVersion: 6 });
  observer.event(inv, { kind: 'completed', outcome: 'success', code: undefined, message: undefined });
  span.end(id, 200);
}

async function run(n: number): Promise<number> {
  const t = process.hrtime.bigint();
  for (let i = 0; i < n; i++) {
    invocation(i);
    if (i % 2000 === 1999) await writer.flush();
  }
  await writer.flush();
  return Number(process.hrtime.bigint() - t) / 1000 / n;
}

await run(50_000); // warm-up
bytes = 0;
const n = 200_000;
const us = await run(n);
process.stdout.write(`${us.toFixed(2)} µs of Node per invocation, ${(bytes / n).toFixed(0)} bytes stored\n`);
await writer.close();
