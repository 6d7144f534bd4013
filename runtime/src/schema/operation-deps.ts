import type { Logger } from 'pino';
import type { DiscoverOptions, DiscoveryResponse } from '../service-client/discovery.ts';
import type { SchemaRegistry } from './registry.ts';
import type { SchemaStore } from './store.ts';

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
