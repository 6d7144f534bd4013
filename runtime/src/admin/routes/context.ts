import type { FastifyInstance } from 'fastify';
import type { RegisterDeployment } from '../../schema/register.ts';
import type { SchemaRegistry } from '../../schema/registry.ts';
import type { AdminApiVersion } from '../request.ts';

/** What every route module gets: the app's dependencies and the API version of the prefix it is mounted under. */
export interface AdminRouteContext {
  readonly registry: SchemaRegistry;
  readonly register: RegisterDeployment;
  readonly version: string;
  readonly ingressEndpoint: string;
  readonly clusterName: string;
  /** The admin API version of the path prefix (`/v2` → 2); undefined for unprefixed paths. */
  readonly apiVersion: AdminApiVersion;
}

export type AdminRoutes = (scope: FastifyInstance, ctx: AdminRouteContext) => void;
