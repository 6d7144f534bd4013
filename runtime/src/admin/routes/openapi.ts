import { sendJson } from '../reply.ts';
import type { AdminRoutes } from './context.ts';

export const openApiRoutes: AdminRoutes = (scope, ctx) => {
  scope.get('/openapi', async (_req, reply) => sendJson(reply, ctx.openApi()));
};
