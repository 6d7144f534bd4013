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
import { schemaOperationDeps, type SchemaOperationOptions } from './operation-deps.ts';
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
  const deps = schemaOperationDeps(options);
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
