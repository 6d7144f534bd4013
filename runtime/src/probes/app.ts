import Fastify, { type FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';

/** Port 5122: Prometheus metrics and the probes Kubernetes uses; cluster-internal, no auth. */
export function buildProbesApp(registry: Registry, isReady: () => boolean = () => true): FastifyInstance {
  const app = Fastify({ logger: false });
  app.get('/health', async (_req, reply) => reply.code(200).send());
  app.get('/ready', async (_req, reply) => reply.code(isReady() ? 200 : 503).send());
  app.get('/metrics', async (_req, reply) =>
    reply.header('content-type', registry.contentType).send(await registry.metrics()),
  );
  return app;
}
