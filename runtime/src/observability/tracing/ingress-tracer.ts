import { SpanKind, SpanStatusCode, type Attributes, type Span, type Tracer } from '@opentelemetry/api';
import { contextOf, fromHeaders, plainParent, serializeContext } from './context.ts';
import { nowNs, randomHex, RecordingTracer } from './recording-tracer.ts';

/** The span of one ingress request that invokes a handler. */
export interface IngressSpan {
  /** Its context: the new invocation's trace is parented to it. */
  readonly traceContext: string;
  /** Ends it: with the invocation's id once known, and the HTTP status the ingress answered. */
  end(invocationId: string | undefined, status: number): void;
}

export interface IngressRequestInfo {
  readonly service: string;
  readonly handler: string;
  readonly key: string | undefined;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly remoteAddress: string | undefined;
  readonly remotePort: number | undefined;
}

/**
 * `ingress <target>` spans (Restate's name, with `{key}` in place of the key), parented to the client's W3C
 * `traceparent` when it sent one: the first span of every trace that starts at the ingress.
 */
export class IngressTracer {
  /** Ratchet's own tracer: an ingress span that ends as usual goes to the store compactly (see InvocationTracer). */
  private readonly compact: RecordingTracer | undefined;

  constructor(private readonly tracer: Tracer) {
    this.compact = tracer instanceof RecordingTracer ? tracer : undefined;
  }

  start(info: IngressRequestInfo): IngressSpan {
    const shown = info.key === undefined ? `${info.service}/${info.handler}` : `${info.service}/{key}/${info.handler}`;
    const target =
      info.key === undefined ? `${info.service}/${info.handler}` : `${info.service}/${info.key}/${info.handler}`;
    const compact = this.compact;
    const parent = compact === undefined ? null : plainParent(fromHeaders(info.headers));
    if (compact !== undefined && parent !== null) {
      const traceId = parent?.traceId ?? randomHex(16);
      const spanId = randomHex(8);
      const parentSpanId = parent?.spanId ?? '';
      const startNs = nowNs();
      return {
        traceContext: `00-${traceId}-${spanId}-01`,
        end(invocationId, status) {
          if (invocationId !== undefined && status < 500 && Number.isSafeInteger(status) && status >= 0) {
            compact.emit({
              kind: 'i',
              traceId,
              spanId,
              parentSpanId,
              startNs,
              endNs: nowNs(),
              id: invocationId,
              target,
              service: info.service,
              handler: info.handler,
              address: info.remoteAddress,
              port: info.remotePort,
              status,
            });
            return;
          }
          const span = compact.resume(
            { traceId, spanId, parentSpanId },
            `ingress ${shown}`,
            startNs,
            attributes(info, target) as Record<string, string | number>,
          );
          finish(span, invocationId, status);
        },
      };
    }
    const span = this.tracer.startSpan(
      `ingress ${shown}`,
      { kind: SpanKind.INTERNAL, attributes: attributes(info, target) },
      contextOf(fromHeaders(info.headers)),
    );
    return {
      traceContext: serializeContext(span.spanContext()),
      end(invocationId, status) {
        finish(span, invocationId, status);
      },
    };
  }
}

function attributes(info: IngressRequestInfo, target: string): Attributes {
  const a: Attributes = {
    'rpc.service': info.service,
    'rpc.method': info.handler,
    'restate.invocation.target': target,
  };
  if (info.remoteAddress !== undefined) a['client.socket.address'] = info.remoteAddress;
  if (info.remotePort !== undefined) a['client.socket.port'] = info.remotePort;
  return a;
}

function finish(span: Span, invocationId: string | undefined, status: number): void {
  if (invocationId !== undefined) span.setAttribute('restate.invocation.id', invocationId);
  span.setAttribute('http.response.status_code', status);
  if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
  span.end();
}
