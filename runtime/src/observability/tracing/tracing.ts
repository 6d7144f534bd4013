import { SpanKind, SpanStatusCode, trace, type Attributes, type Span, type Tracer } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor, type SpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { Logger } from 'pino';
import { RecordingTracer } from './recording-tracer.ts';
import { StoreSpanProcessor, type SpanSink } from './store-exporter.ts';

/** The instrumentation scope of Ratchet's spans. */
const SCOPE = 'services';

export interface TracingOptions {
  readonly clusterName: string;
  readonly nodeName: string;
  readonly version: string;
  /** Finished spans go here (the node's observability writer); undefined when the store is off. */
  readonly sink: SpanSink | undefined;
  readonly logger: Logger;
}

export interface Tracing {
  readonly tracer: Tracer;
  /** Whether spans also go to an OTLP collector. */
  readonly exportsOtlp: boolean;
  shutdown(): Promise<void>;
}

/**
 * The node's tracer provider (OpenTelemetry's SDK): spans go to the cluster's store, and also to an OTLP/HTTP
 * collector when the standard `OTEL_EXPORTER_OTLP_*` variables name one (the exporter reads them itself: endpoint,
 * headers, timeout, compression). The resource says which node of which cluster emitted a span, as Restate does.
 */
export function createTracing(options: TracingOptions): Tracing | undefined {
  // `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` add an exporter (which reads the rest itself).
  const env = process.env;
  const processors: SpanProcessor[] = options.sink === undefined ? [] : [new StoreSpanProcessor(options.sink)];
  const otlp = (env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? '') !== '' || (env.OTEL_EXPORTER_OTLP_ENDPOINT ?? '') !== '';
  // Neither a store nor a collector: no spans at all (they would cost the invocation path for nobody).
  if (processors.length === 0 && !otlp) return undefined;
  const resource = {
    'service.name': 'Ratchet',
    'service.namespace': 'Ratchet',
    'service.version': options.version,
    'service.instance.id': `${options.clusterName}/${options.nodeName}`,
  };
  // Only the store: spans become its records directly, without the SDK's per-span machinery (recording-tracer.ts).
  if (!otlp && options.sink !== undefined) {
    return {
      tracer: new RecordingTracer(options.sink, resource, SCOPE),
      exportsOtlp: false,
      shutdown: () => Promise.resolve(),
    };
  }
  if (otlp) {
    processors.push(new BatchSpanProcessor(new OTLPTraceExporter()));
    options.logger.info(
      { endpoint: env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? env.OTEL_EXPORTER_OTLP_ENDPOINT },
      'exporting traces to an OTLP collector',
    );
  }
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes(resource),
    spanProcessors: processors,
  });
  return {
    tracer: provider.getTracer(SCOPE, options.version),
    exportsOtlp: otlp,
    shutdown: () => provider.shutdown(),
  };
}

/** Attributes and status of a span that ended with an error. */
export function endWithError(span: Span, code: string, message: string, attrs: Attributes = {}): void {
  span.setAttributes({ 'restate.error.code': code, ...attrs });
  span.setStatus({ code: SpanStatusCode.ERROR, message });
  span.end();
}

export { SpanKind, trace };
