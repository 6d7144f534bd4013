import type { Cluster, Deployment, Subscription } from '../../api/v1alpha1/index.ts';
import type { KubeObject } from '../../kube/types.ts';

/*
 * The v1alpha1 resource types are interfaces without KubeObject's index signature, so they are not assignable to it;
 * intersecting gives types the Kube port accepts and that still read as the typed resource.
 */
export type ClusterObject = Cluster & KubeObject;
export type DeploymentObject = Deployment & KubeObject;
export type SubscriptionObject = Subscription & KubeObject;
