import type { FastifyInstance } from 'fastify';
import type { SchemaOperations } from '../../schema/operations.ts';
import type { RegisterDeployment } from '../../schema/register.ts';
import type { SchemaRegistry } from '../../schema/registry.ts';
import type { AdminApiVersion } from '../request.ts';

/** What every route module gets: the app's dependencies and the API version of the prefix it is mounted under. */
export interface AdminRouteContext {
  readonly registry: SchemaRegistry;
  readonly register: RegisterDeployment;
  /** Every other schema change (deployment update/delete, service settings, Kafka clusters, subscriptions). */
  readonly operations: SchemaOperations;
  readonly version: string;
  readonly ingressEndpoint: string;
  readonly clusterName: string;
  /** The admin API version of the path prefix (`/v2` → 2); undefined for unprefixed paths. */
  readonly apiVersion: AdminApiVersion;
  /** The admin API's own OpenAPI document, built from the routes registered (served by `GET /openapi`). */
  readonly openApi: () => unknown;
  /** restate's experimental feature flags and whether each is on (`GET /version`). */
  readonly features: Readonly<Record<string, boolean>>;
}

export type AdminRoutes = (scope: FastifyInstance, ctx: AdminRouteContext) => void;
