import type { FastifyRequest } from 'fastify';
import { roleAllows } from '../auth/roles.ts';
import { authorize, type Authenticator } from '../auth/verifier.ts';
import { normalizePath, parseIngressPath, type ServiceLookup } from './path.ts';

/**
 * Managed mode on the ingress: every request carries an access token. The role `ingress` (or `full`) opens everything;
 * `awakeables` only `POST /restate/awakeables/{id}/resolve|reject` and its `/restate/a/…` alias, recognised by the
 * router's own path rules so that the two can never disagree.
 */
export function ingressAuthHook(auth: Authenticator, services: ServiceLookup): (req: FastifyRequest) => Promise<void> {
  return async (req) => {
    // A CORS preflight never carries credentials (browsers strip them) and only echoes the request's headers.
    if (req.method === 'OPTIONS' && req.headers['access-control-request-method'] !== undefined) return;
    const principal = await auth.authenticate(req.headers.authorization);
    if (roleAllows(principal.role, 'ingress')) return;
    authorize(principal, isAwakeableCompletion(req, services) ? 'awakeable-completion' : 'ingress');
  };
}

function isAwakeableCompletion(req: FastifyRequest, services: ServiceLookup): boolean {
  if (req.method !== 'POST') return false;
  const url = req.originalUrl;
  const q = url.indexOf('?');
  try {
    return parseIngressPath(normalizePath(q < 0 ? url : url.slice(0, q)), services).kind === 'awakeable';
  } catch {
    return false; // not a path the router would serve: nothing this role may reach
  }
}
