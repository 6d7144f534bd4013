import { SubscriptionId } from '../../ids/deployment-id.ts';
import { InvalidIdError } from '../../ids/id-codec.ts';
import { SubscriptionNotFoundError } from '../../schema/errors.ts';
import { renderSubscription } from '../../schema/render.ts';
import { InvalidPathParameterError } from '../errors.ts';
import { sendJson } from '../reply.ts';
import {
  ListSubscriptionsQuery,
  type SubscriptionParams,
  type SubscriptionStatusResponse,
} from '../model/subscriptions.ts';
import { parseCreateSubscriptionRequest, readJsonBody, readQuery } from '../request.ts';
import type { AdminRoutes } from './context.ts';

function subscriptionIdParam(value: string): string {
  try {
    return SubscriptionId.parse(value);
  } catch (err) {
    if (err instanceof InvalidIdError) throw new InvalidPathParameterError('subscription', value, err.reason);
    throw err;
  }
}

/** An exact-match filter of `GET /subscriptions`; absent matches everything. */
function wanted(filter: string | null | undefined, value: string): boolean {
  return filter === undefined || filter === null || filter === value;
}

/** Kafka subscriptions: the registry (every node's consumers follow it). */
export const subscriptionRoutes: AdminRoutes = (scope, ctx) => {
  scope.get<{ Querystring: unknown }>('/subscriptions', async (req, reply) => {
    const { sink, source } = readQuery(ListSubscriptionsQuery, req.query);
    const subscriptions = ctx.registry.subscriptions().filter((s) => wanted(sink, s.sink) && wanted(source, s.source));
    return sendJson(reply, { subscriptions: subscriptions.map(renderSubscription) });
  });

  scope.post('/subscriptions', async (req, reply) => {
    const body = readJsonBody(req.headers['content-type'], req.body as Buffer | undefined);
    const { source, sink, options } = parseCreateSubscriptionRequest(body);
    const subscription = await ctx.operations.createSubscription(source, sink, options);
    reply.header('location', `subscriptions/${subscription.id}`);
    return sendJson(reply, renderSubscription(subscription), 201);
  });

  scope.get<{ Params: SubscriptionParams }>('/subscriptions/:subscription', async (req, reply) => {
    // `/subscriptions/` is not a route (404), though the router hands it here with an empty id.
    if (req.params.subscription === '') return reply.callNotFound();
    const id = subscriptionIdParam(req.params.subscription);
    const subscription = ctx.registry.subscription(id);
    if (subscription === undefined) throw new SubscriptionNotFoundError(id);
    return sendJson(reply, renderSubscription(subscription));
  });

  scope.delete<{ Params: SubscriptionParams }>('/subscriptions/:subscription', async (req, reply) => {
    if (req.params.subscription === '') return reply.callNotFound();
    await ctx.operations.deleteSubscription(subscriptionIdParam(req.params.subscription));
    return reply.code(202).send();
  });
};

/** `GET /subscriptions/{subscription}/status`: the consumers of a subscription on every node (Ratchet). */
export function subscriptionStatusRoutes(
  status: (id: string) => Promise<SubscriptionStatusResponse | undefined>,
): AdminRoutes {
  return (scope) => {
    scope.get<{ Params: SubscriptionParams }>('/subscriptions/:subscription/status', async (req, reply) => {
      const id = subscriptionIdParam(req.params.subscription);
      const answer = await status(id);
      if (answer === undefined) throw new SubscriptionNotFoundError(id);
      return sendJson(reply, answer);
    });
  };
}
