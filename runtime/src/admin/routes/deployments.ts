import type { FastifyRequest } from 'fastify';
import { DeploymentId } from '../../ids/deployment-id.ts';
import { InvalidIdError } from '../../ids/id-codec.ts';
import { DeploymentNotFoundError, DeprecatedPutDeploymentError } from '../../schema/errors.ts';
import { renderDeployment, renderDetailedDeployment, renderRegisterResponse } from '../../schema/render.ts';
import type { DeploymentSchema } from '../../schema/types.ts';
import { InvalidPathParameterError } from '../errors.ts';
import { sendJson } from '../reply.ts';
import { DeleteDeploymentQuery, type DeploymentParams } from '../model/deployments.ts';
import { parseRegisterDeploymentRequest, parseUpdateDeploymentRequest, readJsonBody, readQuery } from '../request.ts';
import type { AdminRoutes, AdminRouteContext } from './context.ts';

/** A well-formed deployment id (400 text otherwise, like restate's path extractor). */
function deploymentIdParam(value: string): string {
  try {
    return DeploymentId.parse(value);
  } catch (err) {
    if (err instanceof InvalidIdError) throw new InvalidPathParameterError('deployment', value, err.reason);
    throw err;
  }
}

function deploymentParam(ctx: AdminRouteContext, value: string): DeploymentSchema {
  const id = deploymentIdParam(value);
  const deployment = ctx.registry.deployment(id);
  if (deployment === undefined) throw new DeploymentNotFoundError(id);
  return deployment;
}

type DeploymentRequest = FastifyRequest<{ Params: DeploymentParams }>;

/** Response header of `DELETE /deployments/{id}`: how many unfinished invocations were pinned to it. */
export const PINNED_INVOCATIONS_HEADER = 'x-ratchet-pinned-invocations';

export const deploymentRoutes: AdminRoutes = (scope, ctx) => {
  scope.get('/deployments', async (_req, reply) =>
    sendJson(reply, { deployments: ctx.registry.deployments().map(renderDeployment) }),
  );

  scope.post('/deployments', async (req, reply) => {
    const body = readJsonBody(req.headers['content-type'], req.body as Buffer | undefined);
    const request = parseRegisterDeploymentRequest(body, ctx.apiVersion);
    const result = await ctx.register(request);
    // Admin API v1/v2 always answered 201; from v3 on, an already existing deployment is 200.
    const status = result.outcome === 'created' || ctx.apiVersion === 2 ? 201 : 200;
    reply.header('location', `deployments/${result.deployment.id}`);
    return sendJson(reply, renderRegisterResponse(result.deployment, result.services, ctx.registry.defaults), status);
  });

  scope.get<{ Params: DeploymentParams }>('/deployments/:deployment', async (req, reply) => {
    // `/deployments/` is not a route in restate (404), though the router hands it here with an empty id.
    if (req.params.deployment === '') return reply.callNotFound();
    const deployment = deploymentParam(ctx, req.params.deployment);
    const services = ctx.registry.deploymentServices(deployment);
    return sendJson(reply, renderDetailedDeployment(deployment, services, ctx.registry.defaults));
  });

  const update = async (req: DeploymentRequest, method: 'PATCH' | 'PUT'): Promise<unknown> => {
    const id = deploymentIdParam(req.params.deployment);
    const body = readJsonBody(req.headers['content-type'], req.body as Buffer | undefined);
    // PUT updates in place like PATCH on the unversioned path (specification 4.3) and under /v2; the explicitly
    // versioned /v3 and /v4 refuse it after reading the request, like restate.
    if (method === 'PUT' && ctx.apiVersion !== 2 && ctx.apiVersion !== undefined)
      throw new DeprecatedPutDeploymentError();
    const result = await ctx.operations.updateDeployment(id, parseUpdateDeploymentRequest(body));
    return renderDetailedDeployment(result.deployment, result.services, ctx.registry.defaults);
  };

  scope.patch<{ Params: DeploymentParams }>('/deployments/:deployment', async (req, reply) => {
    if (req.params.deployment === '') return reply.callNotFound();
    return sendJson(reply, await update(req, 'PATCH'));
  });

  scope.put<{ Params: DeploymentParams }>('/deployments/:deployment', async (req, reply) => {
    if (req.params.deployment === '') return reply.callNotFound();
    return sendJson(reply, await update(req, 'PUT'));
  });

  scope.delete<{ Params: DeploymentParams; Querystring: unknown }>('/deployments/:deployment', async (req, reply) => {
    if (req.params.deployment === '') return reply.callNotFound();
    const id = deploymentIdParam(req.params.deployment);
    const { force } = readQuery(DeleteDeploymentQuery, req.query);
    // Only forced deletion exists (restate answers the same 501 with an empty body).
    if (force !== true) return reply.code(501).send();
    const result = await ctx.operations.deleteDeployment(id);
    // The body stays empty (restate clients expect nothing); pinned invocations are reported in a header.
    reply.header(PINNED_INVOCATIONS_HEADER, String(result.pinned.count));
    if (result.pinned.count > 0) {
      reply.header(
        'warning',
        `199 ratchet "${result.pinned.count} invocation(s) not completed yet were pinned to deployment ${id}; ` +
          'they cannot make progress on it"',
      );
    }
    return reply.code(202).send();
  });
};
