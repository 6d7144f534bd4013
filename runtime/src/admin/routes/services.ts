import { HandlerNotFoundError, ServiceNotFoundError } from '../../schema/errors.ts';
import { renderHandlerOf, renderService, type RenderContext } from '../../schema/render.ts';
import { serviceOpenApi } from '../../schema/service-openapi.ts';
import type { ActiveService } from '../../schema/types.ts';
import type { HandlerParams, ServiceParams } from '../model/services.ts';
import { sendJson } from '../reply.ts';
import { parseModifyServiceRequest, readJsonBody } from '../request.ts';
import type { AdminRoutes, AdminRouteContext } from './context.ts';

function renderContext(ctx: AdminRouteContext, service: ActiveService): RenderContext {
  const deployment = ctx.registry.deployment(service.deploymentId);
  return { protocolType: deployment?.protocolType ?? 'BidiStream', defaults: ctx.registry.defaults };
}

function serviceParam(ctx: AdminRouteContext, name: string): ActiveService {
  const service = ctx.registry.service(name);
  if (service === undefined) throw new ServiceNotFoundError(name);
  return service;
}

export const serviceRoutes: AdminRoutes = (scope, ctx) => {
  scope.get('/services', async (_req, reply) =>
    sendJson(reply, { services: ctx.registry.services().map((s) => renderService(s, renderContext(ctx, s))) }),
  );

  scope.get<{ Params: ServiceParams }>('/services/:service', async (req, reply) => {
    const service = serviceParam(ctx, req.params.service);
    return sendJson(reply, renderService(service, renderContext(ctx, service)));
  });

  scope.patch<{ Params: ServiceParams }>('/services/:service', async (req, reply) => {
    const body = readJsonBody(req.headers['content-type'], req.body as Buffer | undefined);
    const service = await ctx.operations.modifyService(req.params.service, parseModifyServiceRequest(body));
    return sendJson(reply, renderService(service, renderContext(ctx, service)));
  });

  scope.get<{ Params: ServiceParams }>('/services/:service/openapi', async (req, reply) => {
    const service = serviceParam(ctx, req.params.service);
    return sendJson(reply, serviceOpenApi(service, ctx.ingressEndpoint));
  });

  scope.get<{ Params: ServiceParams }>('/services/:service/handlers', async (req, reply) => {
    const service = serviceParam(ctx, req.params.service);
    const render = renderContext(ctx, service);
    return sendJson(reply, { handlers: service.schema.handlers.map((h) => renderHandlerOf(service, h, render)) });
  });

  scope.get<{ Params: HandlerParams }>('/services/:service/handlers/:handler', async (req, reply) => {
    const { service: serviceName, handler: handlerName } = req.params;
    const service = ctx.registry.service(serviceName);
    const handler = service?.schema.handlers.find((h) => h.name === handlerName);
    if (service === undefined || handler === undefined) throw new HandlerNotFoundError(serviceName, handlerName);
    return sendJson(reply, renderHandlerOf(service, handler, renderContext(ctx, service)));
  });
};
