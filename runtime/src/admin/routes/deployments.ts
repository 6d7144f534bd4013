import { DeploymentId } from '../../ids/deployment-id.ts';
import { InvalidIdError } from '../../ids/id-codec.ts';
import { DeploymentNotFoundError } from '../../schema/errors.ts';
import { renderDeployment, renderDetailedDeployment, renderRegisterResponse } from '../../schema/render.ts';
import type { DeploymentSchema } from '../../schema/types.ts';
import { InvalidPathParameterError } from '../errors.ts';
import { sendJson } from '../reply.ts';
import { parseRegisterDeploymentRequest, readJsonBody } from '../request.ts';
import type { AdminRoutes, AdminRouteContext } from './context.ts';

function deploymentParam(ctx: AdminRouteContext, value: string): DeploymentSchema {
  let id: string;
  try {
    id = DeploymentId.parse(value);
  } catch (err) {
    if (err instanceof InvalidIdError) throw new InvalidPathParameterError('deployment', value, err.reason);
    throw err;
  }
  const deployment = ctx.registry.deployment(id);
  if (deployment === undefined) throw new DeploymentNotFoundError(id);
  return deployment;
}

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

  scope.get<{ Params: { deployment: string } }>('/deployments/:deployment', async (req, reply) => {
    // `/deployments/` is not a route in restate (404), though the router hands it here with an empty id.
    if (req.params.deployment === '') return reply.callNotFound();
    const deployment = deploymentParam(ctx, req.params.deployment);
    const services = ctx.registry.deploymentServices(deployment);
    return sendJson(reply, renderDetailedDeployment(deployment, services, ctx.registry.defaults));
  });
};
