import { DeploymentId } from '../ids/deployment-id.ts';
import { normalizeDeploymentUri, type DiscoverOptions, type DiscoveryResponse } from '../service-client/discovery.ts';
import { LOG_FIELDS } from '../telemetry/logger.ts';
import {
  AmbiguousForcedRegistrationError,
  DeploymentAlreadyRegisteredError,
  IncompatibleServiceRevisionError,
  NotSupportedError,
} from './errors.ts';
import { parseManifest, type ParsedManifest } from './manifest.ts';
import { schemaOperationDeps, type SchemaOperationOptions } from './operation-deps.ts';
import type { SchemaTransaction, StoredService } from './store.ts';
import type { ActiveService, DeploymentSchema, ServiceSchema } from './types.ts';

/**
 * Deployment registration with restate-server 1.7.12's semantics, and the specification's where they differ:
 *
 * - a new URI → a new deployment (`created`);
 * - the same (normalised) URI without `force`: the endpoint is discovered again; an identical manifest answers with
 *   the existing deployment and changes nothing (`unchanged`); a different one is refused with META0004, because
 *   deployments are immutable (restate 1.7.12 instead skips discovery and answers with the existing deployment);
 * - `force: true` overwrites the deployment with that URI in place (same id, new creation time), every service it
 *   exposes gets a new revision, and services it no longer exposes are removed if it was serving them;
 * - a service whose type differs from its latest revision is refused with META0006 unless `force` or `breaking`;
 * - `dry_run` plans all of the above and stores nothing.
 *
 * Discovery runs before the transaction; the checks and the writes run in one transaction under the schema lock, so
 * concurrent registrations (on any runtime process) are serialised and checked against committed state.
 */

export interface RegistrationFlags {
  force: boolean;
  /** Allows incompatible changes to services (a changed service type). `force` implies it. */
  breaking: boolean;
  dryRun: boolean;
  metadata: Record<string, string>;
  additionalHeaders: Record<string, string>;
}

export interface HttpRegistrationRequest extends RegistrationFlags {
  kind: 'http';
  uri: string;
  useHttp11: boolean;
}

export interface LambdaRegistrationRequest extends RegistrationFlags {
  kind: 'lambda';
  arn: string;
  assumeRoleArn: string | undefined;
}

export type RegisterDeploymentRequest = HttpRegistrationRequest | LambdaRegistrationRequest;

/** `created`: a new deployment; `overwritten`: an existing one replaced (force); `unchanged`: already registered. */
export type RegistrationOutcome = 'created' | 'overwritten' | 'unchanged';

export interface RegisterDeploymentResult {
  outcome: RegistrationOutcome;
  /** Nothing was stored; `deployment` is what would have been. */
  dryRun: boolean;
  deployment: DeploymentSchema;
  /** The deployment's services at the revisions it registered (what the admin API renders). */
  services: ActiveService[];
}

export type RegisterDeployment = (req: RegisterDeploymentRequest) => Promise<RegisterDeploymentResult>;

/** Registration is built like the other schema operations (see operation-deps.ts). */
export type RegistrationDeps = SchemaOperationOptions;

/** A stable text form: object keys sorted, services and handlers sorted by name (their order carries no meaning). */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const entries = Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

function byName<T extends { name: string }>(items: readonly T[]): T[] {
  return [...items].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

function canonicalServices(services: readonly ServiceSchema[]): string {
  return canonical(byName(services).map((s) => ({ ...s, handlers: byName(s.handlers) })));
}

function sameEndpoint(existing: DeploymentSchema, existingServices: ServiceSchema[], found: Discovered): boolean {
  return (
    existing.protocolType === found.manifest.protocolType &&
    existing.httpVersion === found.httpVersion &&
    existing.minProtocolVersion === found.manifest.minProtocolVersion &&
    existing.maxProtocolVersion === found.manifest.maxProtocolVersion &&
    existingServices.length === existing.services.length &&
    canonicalServices(existingServices) === canonicalServices(found.manifest.services)
  );
}

/** A discovered endpoint, its manifest validated. */
export interface Discovered {
  uri: string;
  manifest: ParsedManifest;
  raw: unknown;
  httpVersion: DiscoveryResponse['httpVersion'];
  sdkVersion: string | undefined;
}

export interface DiscoverEndpointOptions {
  /** Normalised already (`normalizeDeploymentUri`). */
  uri: string;
  additionalHeaders: Record<string, string>;
  useHttp11: boolean;
  clusterName: string;
  timeoutMs: number;
}

/** Runs discovery against the endpoint and validates its manifest (META0003, META0012–META0015 on failure). */
export async function discoverEndpoint(
  run: (options: DiscoverOptions) => Promise<DiscoveryResponse>,
  options: DiscoverEndpointOptions,
): Promise<Discovered> {
  const response = await run(options);
  return {
    uri: options.uri,
    manifest: parseManifest(response.manifest, {
      manifestVersion: response.manifestVersion,
      httpVersion: response.httpVersion,
    }),
    raw: response.manifest,
    httpVersion: response.httpVersion,
    sdkVersion: response.sdkVersion,
  };
}

function activeServices(
  deployment: DeploymentSchema,
  schemas: readonly ServiceSchema[],
  latest: ReadonlyMap<string, StoredService>,
): ActiveService[] {
  const revisions = new Map(deployment.services.map((s) => [s.name, s.revision]));
  return schemas.map((schema) => {
    const revision = revisions.get(schema.name) ?? 0;
    const current = latest.get(schema.name);
    const overrides =
      current !== undefined && current.revision === revision && current.deploymentId === deployment.id
        ? current.overrides
        : {};
    return { schema, revision, deploymentId: deployment.id, overrides };
  });
}

async function plan(
  tx: SchemaTransaction,
  req: HttpRegistrationRequest,
  found: Discovered,
  now: Date,
): Promise<{ result: RegisterDeploymentResult; write: (() => Promise<void>) | undefined }> {
  const existing = await tx.deploymentsByUri(found.uri);
  let target: DeploymentSchema | undefined;
  if (existing.length > 0) {
    if (!req.force) {
      for (const candidate of existing) {
        const schemas = await tx.revisionsOf(candidate);
        if (sameEndpoint(candidate, schemas, found)) {
          const latest = await tx.latestServices(schemas.map((s) => s.name));
          return {
            result: {
              outcome: 'unchanged',
              dryRun: req.dryRun,
              deployment: candidate,
              services: activeServices(candidate, schemas, latest),
            },
            write: undefined,
          };
        }
      }
      const ids = existing.map((d) => `'${d.id}'`).join(', ');
      throw new DeploymentAlreadyRegisteredError(
        `the deployment uri '${found.uri}' is already registered by deployment ${ids}, which exposes different ` +
          'services or protocol settings. Deployments are immutable: register the new version under a new uri, ' +
          'or use "force": true to overwrite the existing deployment (in-flight invocations may then fail).',
      );
    }
    if (existing.length > 1) {
      throw new AmbiguousForcedRegistrationError(
        `cannot force the registration of '${found.uri}': deployments ${existing.map((d) => `'${d.id}'`).join(', ')} ` +
          'share this uri. Delete all but one of them first.',
      );
    }
    target = existing[0];
  }

  const services = found.manifest.services;
  const newNames = new Set(services.map((s) => s.name));
  const latest = await tx.latestServices([...newNames, ...(target?.services.map((s) => s.name) ?? [])]);
  const revisions = services.map((schema) => {
    const previous = latest.get(schema.name);
    if (previous !== undefined && previous.ty !== schema.ty && !req.force && !req.breaking) {
      throw new IncompatibleServiceRevisionError(schema.name);
    }
    return { schema, revision: (previous?.revision ?? 0) + 1 };
  });
  const removedServices =
    target === undefined
      ? []
      : target.services
          .map((s) => s.name)
          .filter((name) => !newNames.has(name) && latest.get(name)?.deploymentId === target.id);

  const deployment: DeploymentSchema = {
    id: target?.id ?? DeploymentId.generate(now.getTime()),
    uri: found.uri,
    protocolType: found.manifest.protocolType,
    httpVersion: found.httpVersion,
    additionalHeaders: req.additionalHeaders,
    metadata: req.metadata,
    minProtocolVersion: found.manifest.minProtocolVersion,
    maxProtocolVersion: found.manifest.maxProtocolVersion,
    createdAt: now,
    services: revisions.map((r) => ({ name: r.schema.name, revision: r.revision })),
  };
  if (found.sdkVersion !== undefined) deployment.sdkVersion = found.sdkVersion;
  return {
    result: {
      outcome: target === undefined ? 'created' : 'overwritten',
      dryRun: req.dryRun,
      deployment,
      services: revisions.map((r) => ({
        schema: r.schema,
        revision: r.revision,
        deploymentId: deployment.id,
        overrides: {},
      })),
    },
    write: async () => {
      await tx.saveRegistration({
        deployment,
        manifest: found.raw,
        overwrite: target !== undefined,
        revisions,
        removedServices,
      });
      // A service the overwritten deployment no longer exposes falls back to an older revision another deployment
      // still registers, if any (as restate recomputes its index of active revisions).
      await tx.refreshServices(removedServices, new Set());
    },
  };
}

/** Builds the registration operation the admin API calls. */
export function createRegistration(options: RegistrationDeps): RegisterDeployment {
  const deps = schemaOperationDeps(options);
  const log = deps.logger.child({ component: 'registration' });

  return async (req) => {
    if (req.kind === 'lambda') {
      throw new NotSupportedError(
        `Lambda deployments are not supported by Ratchet yet (arn '${req.arn}'). Expose the service over HTTP and ` +
          'register its uri instead.',
      );
    }
    const uri = normalizeDeploymentUri(req.uri);
    const found = await discoverEndpoint(deps.discover, {
      uri,
      additionalHeaders: req.additionalHeaders,
      useHttp11: req.useHttp11,
      clusterName: deps.clusterName,
      timeoutMs: deps.discoveryTimeoutMs,
    });

    const result = await deps.store.transaction(async (tx) => {
      const planned = await plan(tx, req, found, deps.now());
      if (!req.dryRun && planned.write !== undefined) await planned.write();
      return planned.result;
    });

    if (!req.dryRun && result.outcome !== 'unchanged') {
      log.info(
        {
          [LOG_FIELDS.deploymentId]: result.deployment.id,
          uri,
          outcome: result.outcome,
          services: result.deployment.services,
        },
        result.outcome === 'created' ? 'deployment registered' : 'deployment overwritten',
      );
      await deps.registry.load();
    }
    return result;
  };
}
