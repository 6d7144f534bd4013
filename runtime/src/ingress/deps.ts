import type { FastifyRequest } from 'fastify';
import type { ListenerTls } from '../listeners/tls.ts';
import type { Logger } from 'pino';
import type { Authenticator } from '../auth/verifier.ts';
import type { RequestRouter } from '../cluster/forward.ts';
import type { Engine } from '../engine/engine.ts';
import type { IngressTracer } from '../observability/tracing/ingress-tracer.ts';
import type { SchemaRegistry } from '../schema/registry.ts';

export interface IngressDeps {
  engine: Engine;
  /** HTTPS (HTTP/2 and HTTP/1.1 by ALPN) with this certificate; plain HTTP when absent. */
  tls?: ListenerTls | undefined;
  registry: SchemaRegistry;
  logger: Logger;
  requestSizeLimit: number;
  /** The ingress limit's request hook (rate-limit/ingress-hook.ts); no limit when absent. */
  limit?: ((req: FastifyRequest) => Promise<void>) | undefined;
  /** New invocations of a service whose deployment speaks only older protocol versions are refused (RT0020). */
  minProtocolVersion?: number | undefined;
  /** Managed mode: every request needs an access token. Undefined = dev mode, no authentication. */
  auth?: Authenticator | undefined;
  /** Sends requests for partitions other nodes own to them; without it such requests are answered 503. */
  router?: RequestRouter | undefined;
  /** Starts the `ingress <target>` span of each invocation request (the first span of its trace). */
  tracer?: IngressTracer | undefined;
}
