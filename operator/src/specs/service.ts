import { LISTENER_PORTS, type ListenerName } from '../api/v1alpha1/cluster.ts';
import type { Cluster } from '../api/v1alpha1/index.ts';
import { childMeta } from './meta.ts';
import { clusterNames, selectorLabels } from './names.ts';
import type { ServiceObject, ServicePort } from './objects.ts';
import { enabledListeners } from './settings.ts';
import { httpScheme } from './tls.ts';

/** `appProtocol` tells service meshes and gateways what speaks on each port. */
const APP_PROTOCOL: Readonly<Record<ListenerName | 'metrics', string>> = {
  ingress: 'http',
  admin: 'http',
  introspection: 'postgresql',
  observability: 'http',
  metrics: 'http',
};

function port(listener: ListenerName | 'metrics', appProtocol = APP_PROTOCOL[listener]): ServicePort {
  return { name: listener, port: LISTENER_PORTS[listener], targetPort: listener, protocol: 'TCP', appProtocol };
}

/** The HTTP listeners serving TLS say `https`, so that a mesh or gateway in front does not speak plain HTTP to them. */
function appProtocolOf(cluster: Cluster, listener: ListenerName): string {
  return listener === 'introspection' ? APP_PROTOCOL[listener] : httpScheme(cluster, listener);
}

/** `<cluster>-<listener>` in front of one listener of the runtime pods. */
export function buildListenerService(cluster: Cluster, listener: ListenerName): ServiceObject {
  const name = cluster.metadata.name;
  const options = cluster.spec.services?.[listener];
  const type = options?.type ?? 'ClusterIP';
  const spec: ServiceObject['spec'] = {
    type,
    selector: selectorLabels(name),
    ports: [port(listener, appProtocolOf(cluster, listener))],
  };
  if (options?.loadBalancerSourceRanges !== undefined && type === 'LoadBalancer') {
    spec.loadBalancerSourceRanges = [...options.loadBalancerSourceRanges];
  }
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: childMeta(cluster, clusterNames.service(name, listener), {
      labels: options?.labels,
      annotations: options?.annotations,
    }),
    spec,
  };
}

/** `<cluster>-metrics`: always ClusterIP, for Prometheus scraping `/metrics` on 5122. */
export function buildMetricsService(cluster: Cluster): ServiceObject {
  const name = cluster.metadata.name;
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: childMeta(cluster, clusterNames.metricsService(name)),
    spec: { type: 'ClusterIP', selector: selectorLabels(name), ports: [port('metrics')] },
  };
}

/** One Service per enabled listener, then the metrics Service. */
export function buildServices(cluster: Cluster): ServiceObject[] {
  return [...enabledListeners(cluster).map((l) => buildListenerService(cluster, l)), buildMetricsService(cluster)];
}
