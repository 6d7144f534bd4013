import { DeploymentId } from '../ids/deployment-id.ts';
import { checkRoleArn, parseFunctionArn } from '../lambda/arn.ts';
import { normalizeDeploymentUri } from '../service-client/discovery.ts';
import { LOG_FIELDS } from '../telemetry/logger.ts';
import {
  AmbiguousForcedRegistrationError,
  DeploymentAlreadyRegisteredError,
  IncompatibleServiceRevisionError,
} from './errors.ts';
import { parseManifest, type ParsedManifest } from './manifest.ts';
import {
  schemaOperationDeps,
  type Discover,
  type EndpointTarget,
  type SchemaOperationDeps,
  type SchemaOperationOptions,
} from './operation-deps.ts';
import type { SchemaTransaction, StoredService } from './store.ts';
import {
  endpointAddress,
  type ActiveService,
  type DeploymentEndpoint,
  type DeploymentSchema,
  type ServiceSchema,
} from './types.ts';

/**
 * Deployment registration with restate-server 1.7.12's semantics, and the specification's where they differ:
 *
 * - a new URI (HTTP) or function ARN (Lambda) → a new deployment (`created`);
 * - the same (normalised) URI or ARN without `force`: the endpoint is discovered again; an identical manifest (and,
 *   for Lambda, the same role) answers with the existing deployment and changes nothing (`unchanged`); a different
 *   one is refused with META0004, because deployments are immutable (restate 1.7.12 instead skips discovery and
 *   answers with the existing deployment);
 * - `force: true` overwrites the deployment with that URI or ARN in place (same id, new creation time), every service it
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

function sameConnection(a: DeploymentEndpoint, b: DeploymentEndpoint): boolean {
  if (a.kind === 'http') return b.kind === 'http' && a.uri === b.uri && a.httpVersion === b.httpVersion;
  return b.kind === 'lambda' && a.arn === b.arn && a.assumeRoleArn === b.assumeRoleArn;
}

function sameEndpoint(existing: DeploymentSchema, existingServices: ServiceSchema[], found: Discovered): boolean {
  return (
    existing.protocolType === found.manifest.protocolType &&
    sameConnection(existing.endpoint, found.endpoint) &&
    existing.minProtocolVersion === found.manifest.minProtocolVersion &&
    existing.maxProtocolVersion === found.manifest.maxProtocolVersion &&
    existingServices.length === existing.services.length &&
    canonicalServices(existingServices) === canonicalServices(found.manifest.services)
  );
}

/** A discovered endpoint, its manifest validated. */
export interface Discovered {
  /** How it was reached: for HTTP, with the HTTP version discovery ran over. */
  endpoint: DeploymentEndpoint;
  manifest: ParsedManifest;
  raw: unknown;
  sdkVersion: string | undefined;
}

/** What to discover: the endpoint (URI normalised, ARN parsed) and the headers to send. */
export interface DiscoverEndpointOptions {
  target: EndpointTarget;
  additionalHeaders: Record<string, string>;
}

/** Runs discovery against the endpoint and validates its manifest (META0003, META0012–META0015 on failure). */
export async function discoverEndpoint(
  deps: SchemaOperationDeps,
  options: DiscoverEndpointOptions,
): Promise<Discovered> {
  const run: Discover = deps.discover;
  const response = await run({
    target: options.target,
    additionalHeaders: options.additionalHeaders,
    clusterName: deps.clusterName,
    timeoutMs: deps.discoveryTimeoutMs,
  });
  const target = options.target;
  let endpoint: DeploymentEndpoint;
  if (target.kind === 'http') {
    endpoint = {
      kind: 'http',
      uri: target.uri,
      httpVersion: response.transport === 'HTTP/1.1' ? 'HTTP/1.1' : 'HTTP/2.0',
    };
  } else {
    endpoint = { kind: 'lambda', arn: target.fn.arn };
    if (target.assumeRoleArn !== undefined) endpoint.assumeRoleArn = target.assumeRoleArn;
  }
  return {
    endpoint,
    manifest: parseManifest(response.manifest, {
      manifestVersion: response.manifestVersion,
      transport: response.transport,
    }),
    raw: response.manifest,
    sdkVersion: response.sdkVersion,
  };
}

/** The endpoint a registration names, checked: a normalised URI, or a qualified function ARN and a role ARN. */
export function registrationTarget(req: RegisterDeploymentRequest): EndpointTarget {
  if (req.kind === 'http') return { kind: 'http', uri: normalizeDeploymentUri(req.uri), useHttp11: req.useHttp11 };
  const fn = parseFunctionArn(req.arn);
  return req.assumeRoleArn === undefined
    ? { kind: 'lambda', fn }
    : { kind: 'lambda', fn, assumeRoleArn: checkRoleArn(req.assumeRoleArn) };
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
  req: RegisterDeploymentRequest,
  found: Discovered,
  now: Date,
): Promise<{ result: RegisterDeploymentResult; write: (() => Promise<void>) | undefined }> {
  const existing = await tx.deploymentsAt(found.endpoint);
  const address = endpointAddress(found.endpoint);
  const what = found.endpoint.kind === 'http' ? 'uri' : 'arn';
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
      const roleHint =
        found.endpoint.kind === 'lambda'
          ? ' To change only the role or the headers, update the deployment in place (PATCH /deployments/{id}).'
          : '';
      throw new DeploymentAlreadyRegisteredError(
        `the deployment ${what} '${address}' is already registered by deployment ${ids}, which exposes different ` +
          `services or protocol settings. Deployments are immutable: register the new version under a new ${what}, ` +
          'or use "force": true to overwrite the existing deployment (in-flight invocations may then fail).' +
          roleHint,
      );
    }
    if (existing.length > 1) {
      throw new AmbiguousForcedRegistrationError(
        `cannot force the registration of '${address}': deployments ${existing.map((d) => `'${d.id}'`).join(', ')} ` +
          `share this ${what}. Delete all but one of them first.`,
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
    endpoint: found.endpoint,
    protocolType: found.manifest.protocolType,
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
    const found = await discoverEndpoint(deps, {
      target: registrationTarget(req),
      additionalHeaders: req.additionalHeaders,
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
          [found.endpoint.kind === 'http' ? 'uri' : 'arn']: endpointAddress(found.endpoint),
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
