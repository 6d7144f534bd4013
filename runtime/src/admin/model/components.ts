import type { TObject, TSchema } from '@sinclair/typebox';
import { ClusterHealthResponse } from './cluster-health.ts';
import { DeploymentId, SchemaInfo } from './common.ts';
import {
  DeploymentParams,
  DeploymentResponse,
  DetailedDeploymentResponse,
  ListDeploymentsResponse,
  ProtocolType,
  RegisterDeploymentResponse,
  RegisterDeploymentRequest,
  ServiceNameRevPair,
  UpdateDeploymentRequest,
} from './deployments.ts';
import { ErrorDescriptionResponse } from './errors.ts';
import { InvocationLogsResponse, InvocationTraceResponse } from './invocation-activity.ts';
import { InvocationParams, RestartAsNewInvocationResponse } from './invocations.ts';
import {
  CreateKafkaClusterRequest,
  KafkaClusterName,
  KafkaClusterParams,
  KafkaClusterResponse,
  ListKafkaClustersResponse,
  SimpleKafkaClusterResponse,
  UpdateKafkaClusterRequest,
} from './kafka-clusters.ts';
import {
  DeleteRuleRequest,
  Precondition,
  RuleResponse,
  UpsertRuleRequest,
  UserLimits,
  VQueueParams,
} from './limits.ts';
import { QueryRequest, QueryResponse } from './query.ts';
import {
  HandlerMetadata,
  HandlerMetadataType,
  HandlerParams,
  HandlerRetryPolicyMetadata,
  ListServiceHandlersResponse,
  ListServicesResponse,
  ModifyServiceRequest,
  ModifyServiceStateRequest,
  OnMaxAttempts,
  ServiceMetadata,
  ServiceParams,
  ServiceRetryPolicyMetadata,
  ServiceType,
} from './services.ts';
import {
  CreateSubscriptionRequest,
  ListSubscriptionsResponse,
  SubscriptionId,
  SubscriptionParams,
  SubscriptionResponse,
} from './subscriptions.ts';
import { VersionInformation } from './version.ts';

/** Every named schema of the admin API, in the order the OpenAPI document lists them. */
export const ADMIN_COMPONENTS: readonly TSchema[] = [
  ErrorDescriptionResponse,
  VersionInformation,
  ClusterHealthResponse,
  InvocationLogsResponse,
  InvocationTraceResponse,
  DeploymentId,
  SubscriptionId,
  KafkaClusterName,
  ProtocolType,
  ServiceType,
  HandlerMetadataType,
  OnMaxAttempts,
  SchemaInfo,
  ServiceNameRevPair,
  HandlerRetryPolicyMetadata,
  ServiceRetryPolicyMetadata,
  HandlerMetadata,
  ServiceMetadata,
  ListServicesResponse,
  ListServiceHandlersResponse,
  ModifyServiceRequest,
  DeploymentResponse,
  DetailedDeploymentResponse,
  ListDeploymentsResponse,
  RegisterDeploymentRequest,
  RegisterDeploymentResponse,
  UpdateDeploymentRequest,
  CreateKafkaClusterRequest,
  UpdateKafkaClusterRequest,
  SimpleKafkaClusterResponse,
  KafkaClusterResponse,
  ListKafkaClustersResponse,
  CreateSubscriptionRequest,
  SubscriptionResponse,
  ListSubscriptionsResponse,
  ModifyServiceStateRequest,
  QueryRequest,
  QueryResponse,
  RestartAsNewInvocationResponse,
  UserLimits,
  Precondition,
  UpsertRuleRequest,
  RuleResponse,
  DeleteRuleRequest,
];

/** The path parameters of every route, by the name the routes give them. */
export const ADMIN_PATH_PARAMETERS: readonly TObject[] = [
  DeploymentParams,
  ServiceParams,
  HandlerParams,
  KafkaClusterParams,
  SubscriptionParams,
  InvocationParams,
  VQueueParams,
];
