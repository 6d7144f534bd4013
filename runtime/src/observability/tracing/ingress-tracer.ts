import { SpanKind, SpanStatusCode, type Tracer } from '@opentelemetry/api';
import { contextOf, fromHeaders, serializeContext } from './context.ts';

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
  constructor(private readonly tracer: Tracer) {}

  start(info: IngressRequestInfo): IngressSpan {
    const target = info.key === undefined ? `${info.service}/${info.handler}` : `${info.service}/{key}/${info.handler}`;
    const span = this.tracer.startSpan(
      `ingress ${target}`,
      {
        kind: SpanKind.INTERNAL,
        attributes: {
          'rpc.service': info.service,
          'rpc.method': info.handler,
          'restate.invocation.target':
            info.key === undefined ? `${info.service}/${info.handler}` : `${info.service}/${info.key}/${info.handler}`,
          ...(info.remoteAddress === undefined ? {} : { 'client.socket.address': info.remoteAddress }),
          ...(info.remotePort === undefined ? {} : { 'client.socket.port': info.remotePort }),
        },
      },
      contextOf(fromHeaders(info.headers)),
    );
    return {
      traceContext: serializeContext(span.spanContext()),
      end(invocationId, status) {
        if (invocationId !== undefined) span.setAttribute('restate.invocation.id', invocationId);
        span.setAttribute('http.response.status_code', status);
        if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
        span.end();
      },
    };
  }
}
