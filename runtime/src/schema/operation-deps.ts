import type { Logger } from 'pino';
import type { FunctionArn } from '../lambda/arn.ts';
import { discoverLambda } from '../lambda/discovery.ts';
import { LambdaFunctions } from '../lambda/functions.ts';
import { discover, type DiscoveryResponse } from '../service-client/discovery.ts';
import type { SchemaRegistry } from './registry.ts';
import type { SchemaStore, SchemaTransaction } from './store.ts';

export const DEFAULT_DISCOVERY_TIMEOUT_MS = 30_000;

/** The endpoint discovery talks to: an HTTP URI (normalised), or a Lambda function and the role to assume. */
export type EndpointTarget =
  { kind: 'http'; uri: string; useHttp11: boolean } | { kind: 'lambda'; fn: FunctionArn; assumeRoleArn?: string };

export interface EndpointDiscovery {
  target: EndpointTarget;
  additionalHeaders: Record<string, string>;
  clusterName: string;
  /** Whole exchange (for Lambda: the whole invoke). */
  timeoutMs: number;
}

export type Discover = (request: EndpointDiscovery) => Promise<DiscoveryResponse>;

/** Discovery over HTTP (`GET {uri}/discover`) or Lambda (an invoke with the discovery event). */
export function discoverer(lambda: LambdaFunctions): Discover {
  return ({ target, additionalHeaders, clusterName, timeoutMs }) =>
    target.kind === 'http'
      ? discover({ uri: target.uri, useHttp11: target.useHttp11, additionalHeaders, clusterName, timeoutMs })
      : discoverLambda(lambda, {
          fn: target.fn,
          assumeRoleArn: target.assumeRoleArn,
          additionalHeaders,
          clusterName,
          timeoutMs,
        });
}

/** What registration and the other schema operations are built from; what is left out takes its default. */
export interface SchemaOperationOptions {
  registry: SchemaRegistry;
  clusterName: string;
  logger: Logger;
  /** Defaults to the registry's store. */
  store?: SchemaStore;
  /** Default 30 s. */
  discoveryTimeoutMs?: number;
  /** The Lambda clients of this process (shared with the invoker); a new set when absent. */
  lambda?: LambdaFunctions;
  /** Replaceable in tests. */
  discover?: Discover;
  now?: () => Date;
}

/** What each operation module gets. */
export interface SchemaOperationDeps {
  readonly registry: SchemaRegistry;
  readonly store: SchemaStore;
  readonly clusterName: string;
  readonly logger: Logger;
  readonly discoveryTimeoutMs: number;
  readonly discover: Discover;
  readonly now: () => Date;
}

export function schemaOperationDeps(options: SchemaOperationOptions): SchemaOperationDeps {
  return {
    registry: options.registry,
    store: options.store ?? options.registry.store,
    clusterName: options.clusterName,
    logger: options.logger,
    discoveryTimeoutMs: options.discoveryTimeoutMs ?? DEFAULT_DISCOVERY_TIMEOUT_MS,
    discover:
      options.discover ??
      discoverer(options.lambda ?? new LambdaFunctions({ clusterName: options.clusterName, logger: options.logger })),
    now: options.now ?? (() => new Date()),
  };
}

/**
 * A schema change: `change` runs its checks and writes in one transaction (under the schema lock) and the change is
 * announced (NOTIFY) with it, so that every runtime process reloads; `committed` runs after the commit (to log it);
 * then this process's registry is reloaded, so the answer and the next request see the change.
 */
export async function commitSchemaChange<T>(
  deps: SchemaOperationDeps,
  change: (tx: SchemaTransaction) => Promise<T>,
  committed: (result: T) => void = () => undefined,
): Promise<T> {
  const result = await deps.store.transaction(async (tx) => {
    const changed = await change(tx);
    await tx.announce();
    return changed;
  });
  committed(result);
  await deps.registry.load();
  return result;
}
