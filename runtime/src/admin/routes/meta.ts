import type { VersionInformation } from '../model/version.ts';
import { sendJson } from '../reply.ts';
import type { AdminRoutes } from './context.ts';

export const MIN_ADMIN_API_VERSION = 2;
export const MAX_ADMIN_API_VERSION = 4;

export const metaRoutes: AdminRoutes = (scope, ctx) => {
  scope.get('/health', async (_req, reply) => reply.code(200).send());

  scope.get('/version', async (_req, reply) => {
    const version: VersionInformation = {
      version: ctx.version,
      min_admin_api_version: MIN_ADMIN_API_VERSION,
      max_admin_api_version: MAX_ADMIN_API_VERSION,
      ingress_endpoint: ctx.ingressEndpoint,
      // restate lists its experimental feature flags here (Ratchet: the ones it has).
      features: { ...ctx.features },
    };
    return sendJson(reply, version);
  });
};
