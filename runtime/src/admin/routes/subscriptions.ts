import { SubscriptionId } from '../../ids/deployment-id.ts';
import { InvalidIdError } from '../../ids/id-codec.ts';
import { SubscriptionNotFoundError } from '../../schema/errors.ts';
import { renderSubscription } from '../../schema/render.ts';
import { InvalidPathParameterError } from '../errors.ts';
import { sendJson } from '../reply.ts';
import { parseCreateSubscriptionRequest, readJsonBody } from '../request.ts';
import type { AdminRoutes } from './context.ts';

function subscriptionIdParam(value: string): string {
  try {
    return SubscriptionId.parse(value);
  } catch (err) {
    if (err instanceof InvalidIdError) throw new InvalidPathParameterError('subscription', value, err.reason);
    throw err;
  }
}

/** The optional exact-match filters of `GET /subscriptions`; a repeated parameter counts by its last value. */
function filter(value: unknown): string | undefined {
  if (Array.isArray(value)) return filter(value[value.length - 1]);
  return typeof value === 'string' ? value : undefined;
}

/** Kafka subscriptions: the registry only (Ratchet does not consume yet). */
export const subscriptionRoutes: AdminRoutes = (scope, ctx) => {
  scope.get<{ Querystring: Record<string, unknown> }>('/subscriptions', async (req, reply) => {
    const sink = filter(req.query['sink']);
    const source = filter(req.query['source']);
    const subscriptions = ctx.registry
      .subscriptions()
      .filter((s) => (sink === undefined || s.sink === sink) && (source === undefined || s.source === source));
    return sendJson(reply, { subscriptions: subscriptions.map(renderSubscription) });
  });

  scope.post('/subscriptions', async (req, reply) => {
    const body = readJsonBody(req.headers['content-type'], req.body as Buffer | undefined);
    const { source, sink, options } = parseCreateSubscriptionRequest(body);
    const subscription = await ctx.operations.createSubscription(source, sink, options);
    reply.header('location', `subscriptions/${subscription.id}`);
    return sendJson(reply, renderSubscription(subscription), 201);
  });

  scope.get<{ Params: { subscription: string } }>('/subscriptions/:subscription', async (req, reply) => {
    // `/subscriptions/` is not a route (404), though the router hands it here with an empty id.
    if (req.params.subscription === '') return reply.callNotFound();
    const id = subscriptionIdParam(req.params.subscription);
    const subscription = ctx.registry.subscription(id);
    if (subscription === undefined) throw new SubscriptionNotFoundError(id);
    return sendJson(reply, renderSubscription(subscription));
  });

  scope.delete<{ Params: { subscription: string } }>('/subscriptions/:subscription', async (req, reply) => {
    if (req.params.subscription === '') return reply.callNotFound();
    await ctx.operations.deleteSubscription(subscriptionIdParam(req.params.subscription));
    return reply.code(202).send();
  });
};
