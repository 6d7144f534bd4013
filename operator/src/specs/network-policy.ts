import { LISTENER_PORTS, LISTENERS } from '../api/v1alpha1/cluster.ts';
import type { Cluster } from '../api/v1alpha1/index.ts';
import { childMeta, namespaceOf } from './meta.ts';
import { clusterNames, selectorLabels } from './names.ts';
import type { Json, NetworkPolicyObject, NetworkPolicyRule } from './objects.ts';

/*
 * The runtime pods' NetworkPolicy (spec.networkPolicy.enabled, default off). It restricts ingress only: a policy that
 * also lists Egress denies DNS and the database unless every destination is spelled out, which is how the Restate
 * operator's default-deny broke clusters (restate-operator #32/#33). Egress stays open.
 */

const NAMESPACE_LABEL = 'kubernetes.io/metadata.name';
/** The listeners replicas reach each other on. */
const PEER_LISTENERS = ['ingress', 'admin'] as const;

/**
 * Who may reach a listener when spec.networkPolicy.allowFrom does not say: anyone for the ingress (it is the public
 * entry point); the Cluster's own namespace and the operator's for the rest (the operator calls the admin API).
 */
function defaultPeers(cluster: Cluster, operatorNamespace: string): Json[] {
  const peers: Json[] = [{ podSelector: {} }];
  if (operatorNamespace !== namespaceOf(cluster)) {
    peers.push({ namespaceSelector: { matchLabels: { [NAMESPACE_LABEL]: operatorNamespace } } });
  }
  return peers;
}

function rule(port: number, from: Json[] | undefined): NetworkPolicyRule {
  const r: NetworkPolicyRule = { ports: [{ port, protocol: 'TCP' }] };
  if (from !== undefined) r.from = from.map((p) => ({ ...p }));
  return r;
}

export function buildNetworkPolicy(cluster: Cluster, operatorNamespace: string): NetworkPolicyObject | undefined {
  const policy = cluster.spec.networkPolicy;
  if (!(policy?.enabled ?? false)) return undefined;
  const name = cluster.metadata.name;
  const ingress: NetworkPolicyRule[] = [];
  for (const listener of LISTENERS) {
    const given: Json[] | undefined = policy?.allowFrom?.[listener];
    // `from: []` means "from everywhere" to Kubernetes; a user writing an empty list means "from nowhere".
    if (given !== undefined && given.length === 0) continue;
    const from = given ?? (listener === 'ingress' ? undefined : defaultPeers(cluster, operatorNamespace));
    ingress.push(rule(LISTENER_PORTS[listener], from));
  }
  // Prometheus runs anywhere, and some CNIs route kubelet probes through the policy.
  ingress.push(rule(LISTENER_PORTS.metrics, undefined));
  // Replicas forward requests to the owner of a partition on its advertised address (the pod IP), whatever
  // allowFrom admits from outside: closing this would fail every request that lands on a non-owner.
  ingress.push({
    ports: PEER_LISTENERS.map((l) => ({ port: LISTENER_PORTS[l], protocol: 'TCP' as const })),
    from: [{ podSelector: { matchLabels: selectorLabels(name) } }],
  });
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: childMeta(cluster, clusterNames.networkPolicy(name)),
    spec: { podSelector: { matchLabels: selectorLabels(name) }, policyTypes: ['Ingress'], ingress },
  };
}
