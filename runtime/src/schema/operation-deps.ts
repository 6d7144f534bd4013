import type { Logger } from 'pino';
import { discover, type DiscoverOptions, type DiscoveryResponse } from '../service-client/discovery.ts';
import type { SchemaRegistry } from './registry.ts';
import type { SchemaStore, SchemaTransaction } from './store.ts';

export const DEFAULT_DISCOVERY_TIMEOUT_MS = 30_000;

/** What registration and the other schema operations are built from; what is left out takes its default. */
export interface SchemaOperationOptions {
  registry: SchemaRegistry;
  clusterName: string;
  logger: Logger;
  /** Defaults to the registry's store. */
  store?: SchemaStore;
  /** Default 30 s. */
  discoveryTimeoutMs?: number;
  /** Replaceable in tests. */
  discover?: (options: DiscoverOptions) => Promise<DiscoveryResponse>;
  now?: () => Date;
}

/** What each operation module gets. */
export interface SchemaOperationDeps {
  readonly registry: SchemaRegistry;
  readonly store: SchemaStore;
  readonly clusterName: string;
  readonly logger: Logger;
  readonly discoveryTimeoutMs: number;
  readonly discover: (options: DiscoverOptions) => Promise<DiscoveryResponse>;
  readonly now: () => Date;
}

export function schemaOperationDeps(options: SchemaOperationOptions): SchemaOperationDeps {
  return {
    registry: options.registry,
    store: options.store ?? options.registry.store,
    clusterName: options.clusterName,
    logger: options.logger,
    discoveryTimeoutMs: options.discoveryTimeoutMs ?? DEFAULT_DISCOVERY_TIMEOUT_MS,
    discover: options.discover ?? discover,
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
