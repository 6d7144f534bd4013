import type { ListenerName } from '../api/v1alpha1/cluster.ts';

/*
 * Names of the objects a Cluster owns. Shared by the Cluster controller (which creates them) and the Deployment and
 * Subscription controllers (which find a Cluster's admin API and token through them).
 */

export const clusterNames = {
  /** The apps/v1 Deployment of runtime pods, its ServiceAccount (when created) and PDB. */
  runtime: (cluster: string): string => cluster,
  service: (cluster: string, listener: ListenerName): string => `${cluster}-${listener}`,
  /** The ClusterIP Service of the metrics and probe listener (5122), for Prometheus. */
  metricsService: (cluster: string): string => `${cluster}-metrics`,
  config: (cluster: string): string => `${cluster}-config`,
  signingKey: (cluster: string): string => `${cluster}-signing-key`,
  token: (cluster: string): string => `${cluster}-token`,
  /** The bundled PostgreSQL (test clusters only): its StatefulSet, Service and credentials Secret share this name. */
  postgres: (cluster: string): string => `${cluster}-postgres`,
  networkPolicy: (cluster: string): string => `${cluster}-runtime`,
} as const;

/** Labels on everything a Cluster owns; the selector of its runtime pods is the first three. */
export function clusterLabels(cluster: string, component = 'runtime'): Record<string, string> {
  return {
    'app.kubernetes.io/name': 'ratchet',
    'app.kubernetes.io/instance': cluster,
    'app.kubernetes.io/component': component,
    'app.kubernetes.io/managed-by': 'ratchet-operator',
  };
}

/** The label selector of a Cluster's pods of one component (runtime or postgres): the first three labels. */
export function selectorLabels(cluster: string, component = 'runtime'): Record<string, string> {
  return {
    'app.kubernetes.io/name': 'ratchet',
    'app.kubernetes.io/instance': cluster,
    'app.kubernetes.io/component': component,
  };
}

/** Key of the access token in the token Secret. */
export const TOKEN_KEY = 'token';
/** Key of the PKCS#8 private key in the signing-key Secret. */
export const SIGNING_KEY_KEY = 'private.pem';
