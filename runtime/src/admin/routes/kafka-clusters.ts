import { KafkaClusterNotFoundError } from '../../schema/errors.ts';
import { renderKafkaCluster } from '../../schema/render.ts';
import { sendJson } from '../reply.ts';
import { DeleteKafkaClusterQuery, GetKafkaClusterQuery, type KafkaClusterParams } from '../model/kafka-clusters.ts';
import { parseCreateKafkaClusterRequest, parseUpdateKafkaClusterRequest, readJsonBody, readQuery } from '../request.ts';
import type { AdminRoutes } from './context.ts';

/** Kafka clusters subscriptions read from: registered here, or defined in the configuration file (read-only). */
export const kafkaClusterRoutes: AdminRoutes = (scope, ctx) => {
  scope.get('/kafka-clusters', async (_req, reply) =>
    sendJson(reply, { clusters: ctx.registry.kafkaClusters().map((c) => renderKafkaCluster(c)) }),
  );

  scope.post('/kafka-clusters', async (req, reply) => {
    const body = readJsonBody(req.headers['content-type'], req.body as Buffer | undefined);
    const { name, properties } = parseCreateKafkaClusterRequest(body);
    const cluster = await ctx.operations.createKafkaCluster(name, properties);
    reply.header('location', `kafka-clusters/${cluster.name}`);
    return sendJson(reply, renderKafkaCluster(cluster), 201);
  });

  scope.get<{ Params: KafkaClusterParams; Querystring: unknown }>(
    '/kafka-clusters/:cluster_name',
    async (req, reply) => {
      // `/kafka-clusters/` is not a route (404), though the router hands it here with an empty name.
      if (req.params.cluster_name === '') return reply.callNotFound();
      const include = readQuery(GetKafkaClusterQuery, req.query).include_subscriptions ?? false;
      const cluster = ctx.registry.kafkaCluster(req.params.cluster_name);
      if (cluster === undefined) throw new KafkaClusterNotFoundError(req.params.cluster_name);
      // `subscriptions` is always present in this response, empty unless asked for.
      const subscriptions = include ? ctx.registry.subscriptions().filter((s) => s.cluster === cluster.name) : [];
      return sendJson(reply, renderKafkaCluster(cluster, subscriptions));
    },
  );

  scope.patch<{ Params: KafkaClusterParams }>('/kafka-clusters/:cluster_name', async (req, reply) => {
    if (req.params.cluster_name === '') return reply.callNotFound();
    const body = readJsonBody(req.headers['content-type'], req.body as Buffer | undefined);
    const { properties } = parseUpdateKafkaClusterRequest(body);
    const cluster = await ctx.operations.updateKafkaCluster(req.params.cluster_name, properties);
    return sendJson(reply, renderKafkaCluster(cluster));
  });

  scope.delete<{ Params: KafkaClusterParams; Querystring: unknown }>(
    '/kafka-clusters/:cluster_name',
    async (req, reply) => {
      if (req.params.cluster_name === '') return reply.callNotFound();
      const force = readQuery(DeleteKafkaClusterQuery, req.query).force ?? false;
      await ctx.operations.deleteKafkaCluster(req.params.cluster_name, force);
      return reply.code(202).send();
    },
  );
};
