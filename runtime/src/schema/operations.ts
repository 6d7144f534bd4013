import type { Logger } from 'pino';
import { discover, type DiscoverOptions, type DiscoveryResponse } from '../service-client/discovery.ts';
import { createDeleteDeployment, type DeleteDeployment } from './delete-deployment.ts';
import {
  createCreateKafkaCluster,
  createDeleteKafkaCluster,
  createUpdateKafkaCluster,
  type CreateKafkaCluster,
  type DeleteKafkaCluster,
  type UpdateKafkaCluster,
} from './kafka-clusters.ts';
import { createModifyService, type ModifyService } from './modify-service.ts';
import type { SchemaOperationDeps } from './operation-deps.ts';
import { DEFAULT_DISCOVERY_TIMEOUT_MS } from './register.ts';
import type { SchemaRegistry } from './registry.ts';
import type { SchemaStore } from './store.ts';
import {
  createCreateSubscription,
  createDeleteSubscription,
  type CreateSubscription,
  type DeleteSubscription,
} from './subscriptions.ts';
import { createUpdateDeployment, type UpdateDeployment } from './update-deployment.ts';

/**
 * The schema changes the admin API makes besides registration, one module each. Every one runs its checks and
 * writes in one transaction under the schema lock, announces itself (NOTIFY) so that every runtime process reloads,
 * and reloads this process's registry before returning, so the answer and the next request see the change.
 */

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

export interface SchemaOperations {
  updateDeployment: UpdateDeployment;
  deleteDeployment: DeleteDeployment;
  modifyService: ModifyService;
  createKafkaCluster: CreateKafkaCluster;
  updateKafkaCluster: UpdateKafkaCluster;
  deleteKafkaCluster: DeleteKafkaCluster;
  createSubscription: CreateSubscription;
  deleteSubscription: DeleteSubscription;
}

export function createSchemaOperations(options: SchemaOperationOptions): SchemaOperations {
  const deps: SchemaOperationDeps = {
    registry: options.registry,
    store: options.store ?? options.registry.store,
    clusterName: options.clusterName,
    logger: options.logger,
    discoveryTimeoutMs: options.discoveryTimeoutMs ?? DEFAULT_DISCOVERY_TIMEOUT_MS,
    discover: options.discover ?? discover,
    now: options.now ?? (() => new Date()),
  };
  return {
    updateDeployment: createUpdateDeployment(deps),
    deleteDeployment: createDeleteDeployment(deps),
    modifyService: createModifyService(deps),
    createKafkaCluster: createCreateKafkaCluster(deps),
    updateKafkaCluster: createUpdateKafkaCluster(deps),
    deleteKafkaCluster: createDeleteKafkaCluster(deps),
    createSubscription: createCreateSubscription(deps),
    deleteSubscription: createDeleteSubscription(deps),
  };
}
