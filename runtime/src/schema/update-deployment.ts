import { checkRoleArn, parseFunctionArn } from '../lambda/arn.ts';
import { normalizeDeploymentUri } from '../service-client/discovery.ts';
import { LOG_FIELDS } from '../telemetry/logger.ts';
import {
  DeploymentNotFoundError,
  DeploymentTypeMismatchError,
  IncompatibleDeploymentUpdateError,
  SchemaNotFoundError,
} from './errors.ts';
import type { EndpointTarget, SchemaOperationDeps } from './operation-deps.ts';
import { discoverEndpoint, type Discovered } from './register.ts';
import type { SchemaTransaction } from './store.ts';
import { endpointAddress, type ActiveService, type DeploymentSchema, type ServiceSchema } from './types.ts';

/**
 * `PATCH /deployments/{id}` (and `PUT` on admin API v2): updates a deployment in place, keeping its id and creation
 * time. Used to move a deployment to a new address (URI, or function ARN), give it new headers or, for Lambda, a new
 * role to assume, typically to repair invocations pinned to it. With no connection detail in the request nothing happens; otherwise the endpoint is discovered again and the
 * update is refused with META0016 unless the endpoint still offers what the deployment registered:
 *
 * - exactly the same supported protocol versions;
 * - every service, with the same service type;
 * - every handler of every service.
 *
 * restate-server 1.7.12 checks only the protocol versions; the specification requires all four (it wins). Additions
 * (new handlers, new services) are fine. Without `overwrite` the stored service schemas are kept as registered and
 * only the connection details and SDK version change; with `overwrite` the schemas are replaced by the discovered
 * ones (existing services keep their revision number, their admin API settings are reset like restate does, new
 * services get the next revision).
 */

export interface UpdateDeploymentRequest {
  /** Which variant's own options the request has (undefined: only headers and flags, valid for both). */
  kind?: 'http' | 'lambda';
  uri?: string;
  useHttp11?: boolean;
  arn?: string;
  assumeRoleArn?: string;
  /** Replaces all headers. */
  additionalHeaders?: Record<string, string>;
  overwrite: boolean;
  dryRun: boolean;
}

export interface UpdateDeploymentResult {
  deployment: DeploymentSchema;
  /** The deployment's services at their revisions, as rendered in `DetailedDeploymentResponse`. */
  services: ActiveService[];
}

export type UpdateDeployment = (id: string, req: UpdateDeploymentRequest) => Promise<UpdateDeploymentResult>;

function byName<T extends { name: string }>(items: readonly T[]): Map<string, T> {
  return new Map(items.map((i) => [i.name, i]));
}

function ranges(d: { minProtocolVersion: number; maxProtocolVersion: number }): string {
  return `${d.minProtocolVersion}..=${d.maxProtocolVersion}`;
}

/** Every reason the discovered endpoint cannot replace the deployment in place, in a stable order. */
function incompatibilities(current: DeploymentSchema, previous: ServiceSchema[], found: Discovered): string[] {
  const problems: string[] = [];
  const manifest = found.manifest;
  if (
    manifest.minProtocolVersion !== current.minProtocolVersion ||
    manifest.maxProtocolVersion !== current.maxProtocolVersion
  ) {
    problems.push(
      `the update tried to change the supported protocol versions from ${ranges(current)} to ${ranges(manifest)}`,
    );
  }
  const offered = byName(manifest.services);
  for (const service of previous) {
    const next = offered.get(service.name);
    if (next === undefined) {
      problems.push(`the service '${service.name}' is missing`);
      continue;
    }
    if (next.ty !== service.ty) {
      problems.push(`the service '${service.name}' changes type from ${service.ty} to ${next.ty}`);
    }
    const handlers = new Set(next.handlers.map((h) => h.name));
    const removed = service.handlers
      .map((h) => h.name)
      .filter((h) => !handlers.has(h))
      .sort();
    if (removed.length > 0) {
      problems.push(
        `the service '${service.name}' no longer has the handlers ${removed.map((h) => `'${h}'`).join(', ')}`,
      );
    }
  }
  return problems;
}

interface Planned {
  deployment: DeploymentSchema;
  /** Overwrite only: the schemas written, with their revisions. */
  revisions: { schema: ServiceSchema; revision: number }[];
  /** Services whose latest revision may change. */
  touched: string[];
}

async function plan(
  tx: SchemaTransaction,
  id: string,
  req: UpdateDeploymentRequest,
  found: Discovered,
  headers: Record<string, string>,
): Promise<Planned> {
  const current = await tx.deployment(id);
  // Deleted while the endpoint was being discovered.
  if (current === undefined) throw new SchemaNotFoundError(`deployment with id '${id}'`);
  const previous = await tx.revisionsOf(current);
  const problems = incompatibilities(current, previous, found);
  if (problems.length > 0) {
    throw new IncompatibleDeploymentUpdateError(
      `an update deployment operation must provide an endpoint with the same services and handlers, and the same ` +
        `supported protocol versions: ${problems.join('; ')}. Register the changed endpoint as a new deployment ` +
        'instead.',
    );
  }

  const deployment: DeploymentSchema = {
    ...current,
    endpoint: found.endpoint,
    protocolType: found.manifest.protocolType,
    additionalHeaders: headers,
  };
  if (found.sdkVersion === undefined) delete deployment.sdkVersion;
  else deployment.sdkVersion = found.sdkVersion;
  if (!req.overwrite) return { deployment, revisions: [], touched: [] };

  const kept = new Map(current.services.map((s) => [s.name, s.revision]));
  const added = found.manifest.services.map((s) => s.name).filter((n) => !kept.has(n));
  const highest = await tx.highestRevisions(added);
  const revisions = found.manifest.services.map((schema) => ({
    schema,
    revision: kept.get(schema.name) ?? (highest.get(schema.name) ?? 0) + 1,
  }));
  deployment.services = revisions.map((r) => ({ name: r.schema.name, revision: r.revision }));
  return { deployment, revisions, touched: revisions.map((r) => r.schema.name) };
}

export function createUpdateDeployment(deps: SchemaOperationDeps): UpdateDeployment {
  const log = deps.logger.child({ component: 'registration' });
  return async (id, req) => {
    // Nothing to change: answered from the registry, without discovery (restate does the same).
    if (
      req.uri === undefined &&
      req.useHttp11 === undefined &&
      req.arn === undefined &&
      req.assumeRoleArn === undefined &&
      req.additionalHeaders === undefined
    ) {
      const deployment = deps.registry.deployment(id);
      if (deployment === undefined) throw new DeploymentNotFoundError(id);
      if (req.kind !== undefined && req.kind !== deployment.endpoint.kind) {
        throw new DeploymentTypeMismatchError(deployment.endpoint.kind, req.kind);
      }
      return { deployment, services: deps.registry.deploymentServices(deployment) };
    }
    const existing = await deps.store.transaction((tx) => tx.deployment(id));
    if (existing === undefined) throw new SchemaNotFoundError(id);
    const current = existing.endpoint;
    if (req.kind !== undefined && req.kind !== current.kind)
      throw new DeploymentTypeMismatchError(current.kind, req.kind);

    let target: EndpointTarget;
    if (current.kind === 'http') {
      const uri = req.uri === undefined ? undefined : normalizeDeploymentUri(req.uri);
      target = {
        kind: 'http',
        uri: uri ?? current.uri,
        // A new address is discovered over HTTP/2 unless told otherwise; the same address keeps its transport.
        useHttp11: req.useHttp11 ?? (uri === undefined && current.httpVersion === 'HTTP/1.1'),
      };
    } else {
      const fn = parseFunctionArn(req.arn ?? current.arn);
      const role = req.assumeRoleArn === undefined ? current.assumeRoleArn : checkRoleArn(req.assumeRoleArn);
      target = role === undefined ? { kind: 'lambda', fn } : { kind: 'lambda', fn, assumeRoleArn: role };
    }
    const headers = req.additionalHeaders ?? existing.additionalHeaders;
    const found = await discoverEndpoint(deps, { target, additionalHeaders: headers });

    const planned = await deps.store.transaction(async (tx) => {
      const p = await plan(tx, id, req, found, headers);
      if (!req.dryRun) {
        await tx.updateDeployment({
          deployment: p.deployment,
          manifest: req.overwrite ? found.raw : undefined,
          revisions: p.revisions,
        });
        await tx.refreshServices(p.touched, new Set(p.touched));
        await tx.announce();
      }
      return p;
    });

    if (req.dryRun) {
      const services = req.overwrite
        ? planned.revisions.map((r) => ({ schema: r.schema, revision: r.revision, deploymentId: id, overrides: {} }))
        : deps.registry.deploymentServices(planned.deployment);
      return { deployment: planned.deployment, services };
    }
    log.info(
      {
        [LOG_FIELDS.deploymentId]: id,
        endpoint: endpointAddress(planned.deployment.endpoint),
        previousEndpoint: endpointAddress(existing.endpoint),
        overwrite: req.overwrite,
        services: planned.deployment.services,
      },
      'deployment updated in place',
    );
    await deps.registry.load();
    const deployment = deps.registry.deployment(id) ?? planned.deployment;
    return { deployment, services: deps.registry.deploymentServices(deployment) };
  };
}
