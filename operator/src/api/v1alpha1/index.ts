import type { TSchema } from '@sinclair/typebox';
import { ClusterSpec, ClusterStatus } from './cluster.ts';
import { DeploymentSpec, DeploymentStatus } from './deployment.ts';
import type { ObjectMeta } from '../../kube/types.ts';
import { SubscriptionSpec, SubscriptionStatus } from './subscription.ts';

export const GROUP = 'ratchet.dev';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;

/** Annotation that pauses reconciliation of one object (deletion still proceeds). */
export const PAUSE_ANNOTATION = `${GROUP}/reconcile`;
export const PAUSE_VALUE = 'paused';

export const FINALIZERS = {
  deployment: `${GROUP}/deregister`,
  subscription: `${GROUP}/unsubscribe`,
} as const;

/** Field managers for server-side apply, one per concern. */
export const FIELD_MANAGER = 'ratchet-operator';

export interface PrinterColumn {
  readonly name: string;
  readonly type: 'string' | 'integer' | 'number' | 'boolean' | 'date';
  readonly jsonPath: string;
  readonly description?: string;
  readonly priority?: number;
}

/** Everything the CRD generator needs about one kind; the schemas are the single source of truth. */
export interface KindDefinition {
  readonly kind: string;
  readonly plural: string;
  readonly singular: string;
  readonly shortNames: readonly string[];
  readonly categories: readonly string[];
  readonly description: string;
  readonly spec: TSchema;
  readonly status: TSchema;
  readonly printerColumns: readonly PrinterColumn[];
}

const READY: PrinterColumn = {
  name: 'Ready',
  type: 'string',
  jsonPath: '.status.conditions[?(@.type=="Ready")].status',
};
const MESSAGE: PrinterColumn = {
  name: 'Message',
  type: 'string',
  jsonPath: '.status.conditions[?(@.type=="Ready")].message',
  priority: 1,
};
const AGE: PrinterColumn = { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' };

export const KINDS = {
  Cluster: {
    kind: 'Cluster',
    plural: 'clusters',
    singular: 'cluster',
    shortNames: ['rtc'],
    categories: ['ratchet'],
    description: 'A Ratchet runtime cluster: stateless runtime pods against one PostgreSQL.',
    spec: ClusterSpec,
    status: ClusterStatus,
    printerColumns: [
      READY,
      { name: 'Replicas', type: 'integer', jsonPath: '.status.readyReplicas' },
      { name: 'Version', type: 'string', jsonPath: '.status.version' },
      AGE,
      MESSAGE,
    ],
  },
  Deployment: {
    kind: 'Deployment',
    plural: 'deployments',
    singular: 'deployment',
    shortNames: ['rtd'],
    categories: ['ratchet'],
    description: 'A service endpoint registered with a Ratchet cluster (not an apps/v1 Deployment).',
    spec: DeploymentSpec,
    status: DeploymentStatus,
    printerColumns: [
      READY,
      { name: 'Endpoint', type: 'string', jsonPath: '.status.endpoint' },
      { name: 'Deployment ID', type: 'string', jsonPath: '.status.deploymentId' },
      { name: 'Draining', type: 'integer', jsonPath: '.status.drainingCount' },
      AGE,
      MESSAGE,
    ],
  },
  Subscription: {
    kind: 'Subscription',
    plural: 'subscriptions',
    singular: 'subscription',
    shortNames: ['rts'],
    categories: ['ratchet'],
    description: 'A Kafka topic delivered to a service handler of a Ratchet cluster.',
    spec: SubscriptionSpec,
    status: SubscriptionStatus,
    printerColumns: [
      READY,
      { name: 'Source', type: 'string', jsonPath: '.status.source' },
      { name: 'Sink', type: 'string', jsonPath: '.status.sink' },
      { name: 'ID', type: 'string', jsonPath: '.status.subscriptionId' },
      AGE,
      MESSAGE,
    ],
  },
} as const satisfies Record<string, KindDefinition>;

export type KindName = keyof typeof KINDS;

/** A type alias, not an interface, so each resource is assignable to `KubeObject` (its index signature). */
type Resource<K extends KindName, S, T> = {
  apiVersion: typeof API_VERSION;
  kind: K;
  metadata: ObjectMeta;
  spec: S;
  status?: T;
};

export type Cluster = Resource<'Cluster', ClusterSpec, ClusterStatus>;
export type Deployment = Resource<'Deployment', DeploymentSpec, DeploymentStatus>;
export type Subscription = Resource<'Subscription', SubscriptionSpec, SubscriptionStatus>;

export type { ClusterSpec, ClusterStatus } from './cluster.ts';
export type { DeploymentSpec, DeploymentStatus, SupersededDeployment } from './deployment.ts';
export type { SubscriptionSpec, SubscriptionStatus } from './subscription.ts';
