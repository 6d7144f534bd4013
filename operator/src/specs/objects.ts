import type { KubeObject } from '../kube/types.ts';

/*
 * The shapes of the child objects the builders produce, as plain JSON (the wire form the Kube port applies). Only the
 * fields the operator sets are typed; opaque user input (affinity, resources, extra containers, …) passes through as
 * `Json`. Kubernetes' own defaults are never written, so server-side apply owns exactly what is listed here.
 */

export type Json = Record<string, unknown>;

export type StringMap = Record<string, string>;

export interface ConfigMapObject extends KubeObject {
  data: StringMap;
}

export interface SecretObject extends KubeObject {
  type: string;
  /** base64, as the API server stores it (never `stringData`, which would echo differently on read). */
  data: StringMap;
}

export interface ServiceAccountObject extends KubeObject {
  automountServiceAccountToken: boolean;
}

/** Where a variable's value comes from; the operator uses the first two, user variables may use any source. */
export interface EnvVarSource {
  secretKeyRef?: { name: string; key: string };
  /** The downward API: `metadata.name`, `status.podIP`, … of the pod itself. */
  fieldRef?: { fieldPath: string; apiVersion?: string };
  [source: string]: unknown;
}

export interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: EnvVarSource;
  [field: string]: unknown;
}

export interface ContainerPort {
  name: string;
  containerPort: number;
  protocol: 'TCP';
}

export interface VolumeMount {
  name: string;
  mountPath: string;
  readOnly?: boolean;
  [field: string]: unknown;
}

export interface Volume {
  name: string;
  [field: string]: unknown;
}

export interface Probe {
  httpGet?: { path: string; port: number };
  exec?: { command: string[] };
  periodSeconds: number;
  timeoutSeconds: number;
  failureThreshold: number;
  initialDelaySeconds?: number;
}

export interface Container {
  name: string;
  image: string;
  imagePullPolicy?: string;
  args?: string[];
  ports?: ContainerPort[];
  env?: EnvVar[];
  envFrom?: Json[];
  resources?: Json;
  volumeMounts?: VolumeMount[];
  readinessProbe?: Probe;
  livenessProbe?: Probe;
  startupProbe?: Probe;
  securityContext?: Json;
  [field: string]: unknown;
}

export interface PodSpec {
  containers: Container[];
  volumes: Volume[];
  securityContext: Json;
  serviceAccountName?: string;
  automountServiceAccountToken?: boolean;
  imagePullSecrets?: Json[];
  nodeSelector?: StringMap;
  tolerations?: Json[];
  affinity?: Json;
  topologySpreadConstraints?: Json[];
  priorityClassName?: string;
  terminationGracePeriodSeconds?: number;
  enableServiceLinks?: boolean;
}

export interface PodTemplate {
  metadata: { labels: StringMap; annotations: StringMap };
  spec: PodSpec;
}

export interface LabelSelector {
  matchLabels: StringMap;
}

export interface DeploymentObject extends KubeObject {
  spec: {
    replicas: number;
    revisionHistoryLimit: number;
    selector: LabelSelector;
    strategy: { type: 'RollingUpdate'; rollingUpdate: { maxUnavailable: number; maxSurge: number } };
    template: PodTemplate;
  };
}

/** What the Deployment controller of Kubernetes reports; read, never written. */
export interface DeploymentStatus {
  observedGeneration?: number;
  replicas?: number;
  readyReplicas?: number;
  updatedReplicas?: number;
  availableReplicas?: number;
}

export interface StatefulSetObject extends KubeObject {
  spec: {
    replicas: number;
    serviceName: string;
    selector: LabelSelector;
    template: PodTemplate;
    volumeClaimTemplates: Json[];
    persistentVolumeClaimRetentionPolicy: { whenDeleted: 'Delete' | 'Retain'; whenScaled: 'Delete' | 'Retain' };
  };
}

export interface StatefulSetStatus {
  observedGeneration?: number;
  replicas?: number;
  readyReplicas?: number;
}

export interface ServicePort {
  name: string;
  port: number;
  targetPort: string;
  protocol: 'TCP';
  appProtocol?: string;
}

export interface ServiceObject extends KubeObject {
  spec: {
    type: 'ClusterIP' | 'NodePort' | 'LoadBalancer';
    selector: StringMap;
    ports: ServicePort[];
    loadBalancerSourceRanges?: string[];
  };
}

export interface PodDisruptionBudgetObject extends KubeObject {
  spec: {
    maxUnavailable: number;
    selector: LabelSelector;
    unhealthyPodEvictionPolicy: 'AlwaysAllow' | 'IfHealthyBudget';
  };
}

export interface NetworkPolicyRule {
  ports: { port: number; protocol: 'TCP' }[];
  /** Absent: every source. Never an empty list, which Kubernetes also reads as every source. */
  from?: Json[];
}

export interface NetworkPolicyObject extends KubeObject {
  spec: {
    podSelector: LabelSelector;
    policyTypes: ['Ingress'];
    ingress: NetworkPolicyRule[];
  };
}
