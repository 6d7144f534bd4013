import { Type, type Static } from '@sinclair/typebox';
import {
  Conditions,
  Duration,
  LocalObjectReference,
  Name,
  Opaque,
  OpaqueList,
  OpaqueListByName,
  SecretKeySelector,
  StringEnum,
  StringMap,
  cel,
  exactlyOneOf,
  immutable,
} from './schema-helpers.ts';

/*
 * Cluster: one Ratchet runtime cluster — a Kubernetes Deployment of stateless runtime pods against one PostgreSQL,
 * its Services, ConfigMap, auth Secrets, PDB and optional NetworkPolicy.
 */

export const LISTENERS = ['ingress', 'admin', 'introspection', 'observability'] as const;
export type ListenerName = (typeof LISTENERS)[number];

/** Container ports of the runtime; the operator owns them (users cannot move them through `config`). */
export const LISTENER_PORTS: Readonly<Record<ListenerName | 'metrics', number>> = {
  ingress: 8080,
  admin: 9070,
  introspection: 9071,
  observability: 3100,
  metrics: 5122,
};

const ListenerService = Type.Object(
  {
    enabled: Type.Optional(Type.Boolean({ default: true, description: 'Create the Service for this listener.' })),
    type: Type.Optional(StringEnum(['ClusterIP', 'NodePort', 'LoadBalancer'] as const, { default: 'ClusterIP' })),
    annotations: Type.Optional(StringMap({ description: 'Annotations on the Service (e.g. load-balancer options).' })),
    labels: Type.Optional(StringMap({ description: 'Extra labels on the Service.' })),
    loadBalancerSourceRanges: Type.Optional(
      Type.Array(Type.String({ maxLength: 64 }), {
        maxItems: 32,
        'x-kubernetes-list-type': 'atomic',
        description: 'CIDRs allowed to reach a LoadBalancer.',
      }),
    ),
  },
  { description: 'The Kubernetes Service in front of one runtime listener.' },
);

const Database = Type.Object(
  {
    secretRef: Type.Optional(
      SecretKeySelector('An existing Secret holding a PostgreSQL DSN (postgres://user:pass@host:5432/db).', 'uri'),
    ),
    cnpg: Type.Optional(
      Type.Object(
        {
          clusterName: Name('Name of the CloudNativePG Cluster in this namespace.'),
          secretName: Type.Optional(
            Name(
              'Secret with the application DSN under key `uri` (default: `<clusterName>-app`, made by CloudNativePG).',
            ),
          ),
        },
        { description: 'A CloudNativePG cluster; Ratchet reads the `uri` of its application Secret.' },
      ),
    ),
    bundled: Type.Optional(
      Type.Object(
        {
          image: Type.Optional(
            Type.String({ default: 'postgres:17-alpine', maxLength: 512, description: 'PostgreSQL image.' }),
          ),
          storageSize: Type.Optional(
            Type.String({ default: '1Gi', maxLength: 32, description: 'Size of the data volume.' }),
          ),
          storageClassName: Type.Optional(Type.String({ maxLength: 253, ...cel(immutable('storageClassName')) })),
        },
        {
          description:
            'A single PostgreSQL StatefulSet created by the operator. FOR TEST CLUSTERS ONLY: no backups, no ' +
            'high availability, no upgrades. Use secretRef or cnpg in production.',
        },
      ),
    ),
    maxConnections: Type.Optional(
      Type.Integer({
        minimum: 2,
        maximum: 1000,
        default: 20,
        description: 'PostgreSQL connections per runtime pod (RATCHET_DATABASE_POOL_SIZE).',
      }),
    ),
  },
  {
    description: 'Where the runtime keeps all its state. Exactly one of secretRef, cnpg, bundled.',
    ...cel(exactlyOneOf(['secretRef', 'cnpg', 'bundled'], 'database source')),
  },
);

const KafkaCluster = Type.Object({
  name: Name('Name the runtime knows this Kafka cluster by (used in subscription sources: kafka://<name>/<topic>).'),
  bootstrapServers: Type.Array(Type.String({ maxLength: 512 }), {
    minItems: 1,
    maxItems: 32,
    'x-kubernetes-list-type': 'atomic',
    description: 'host:port of the brokers.',
  }),
  properties: Type.Optional(StringMap({ description: 'librdkafka-style client properties.' })),
  propertiesFrom: Type.Optional(
    LocalObjectReference('A Secret whose keys are merged into properties (credentials such as sasl.password).'),
  ),
});

const Auth = Type.Object(
  {
    enabled: Type.Optional(
      Type.Boolean({
        default: true,
        description: 'Managed mode: every request to ingress, admin and observability needs a bearer JWT.',
      }),
    ),
    signingKeySecret: Type.Optional(
      Name(
        'Bring your own signing key: a Secret with `private.pem` (PKCS#8, Ed25519/ES256/RS256). Default: the operator ' +
          'creates `<cluster>-signing-key`.',
      ),
    ),
    tokenSecret: Type.Optional(
      Name(
        'Bring your own access token: a Secret with `token` (a JWT with role full, signed by the signing key). ' +
          'Default: the operator creates `<cluster>-token`.',
      ),
    ),
  },
  { description: 'Authentication of the runtime listeners.' },
);

const Pod = Type.Object(
  {
    labels: Type.Optional(StringMap()),
    annotations: Type.Optional(StringMap()),
    resources: Type.Optional(Opaque('Container resources (requests/limits) of the runtime container.')),
    env: Type.Optional(OpaqueListByName('Extra environment variables (operator-owned RATCHET_* keys win).')),
    envFrom: Type.Optional(OpaqueList('Extra envFrom sources.')),
    nodeSelector: Type.Optional(StringMap()),
    tolerations: Type.Optional(OpaqueList('Pod tolerations.')),
    affinity: Type.Optional(Opaque('Pod affinity.')),
    topologySpreadConstraints: Type.Optional(OpaqueList('Pod topology spread constraints.')),
    priorityClassName: Type.Optional(Type.String({ maxLength: 253 })),
    podSecurityContext: Type.Optional(Opaque('Pod securityContext (default: non-root, RuntimeDefault seccomp).')),
    securityContext: Type.Optional(Opaque('Runtime container securityContext (default: no privileges, read-only).')),
    sidecars: Type.Optional(OpaqueListByName('Extra containers in the runtime pods.', 16)),
    extraVolumes: Type.Optional(OpaqueListByName('Extra pod volumes.', 32)),
    extraVolumeMounts: Type.Optional(OpaqueListByName('Extra mounts in the runtime container.', 32)),
    terminationGracePeriodSeconds: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 3600,
        description:
          'Seconds a runtime pod gets between SIGTERM and SIGKILL. Default: drainTimeout if set, else ' +
          'shutdownDelaySeconds + 40 (the runtime drains for up to 30 s, plus 10 s to exit).',
      }),
    ),
    shutdownDelaySeconds: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 30,
        default: 5,
        description:
          'After SIGTERM a runtime pod reports not ready and hands its partitions to the other replicas at once, ' +
          'then keeps serving (forwarding to the new owners) for this long, so that Service endpoints stop routing ' +
          'to it before it closes its listeners (RATCHET_SHUTDOWN_DELAY). Shortened when the grace period leaves ' +
          'less than 10 s for the drain after it.',
      }),
    ),
  },
  { description: 'Overrides for the runtime pods. Operator-owned keys win on conflicts.' },
);

const Observability = Type.Object(
  {
    store: Type.Optional(
      Type.Boolean({
        default: true,
        description:
          "Whether the pods keep the cluster's log lines and spans in PostgreSQL and answer Loki and Tempo queries on " +
          'the observability listener (RATCHET_OBSERVABILITY_STORE). Spans also go to an OTLP collector named by ' +
          'OTEL_EXPORTER_OTLP_* in spec.pod.env, store or not.',
      }),
    ),
    retention: Type.Optional(
      Type.Unsafe<string>({
        type: 'string',
        pattern: '^([0-9]+(\\.[0-9]+)?(ms|s|m|h|d|w))+$',
        maxLength: 32,
        description: 'Logs and spans older than this are dropped (default 7d; at least 1m).',
      }),
    ),
    maxSize: Type.Optional(
      Type.Unsafe<string>({
        type: 'string',
        pattern: '^[0-9]+(\\.[0-9]+)? ?([kKMGT]i?B?|B)?$',
        maxLength: 32,
        description: 'Each of the two tables (log lines, spans) is kept under this size, e.g. 10 GiB (the default).',
      }),
    ),
    logLevel: Type.Optional(
      StringEnum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const, {
        description:
          "Log lines at this level or above are stored (default debug: every invocation's lifecycle lines); info " +
          'keeps only retries, pauses, kills and failures of invocations.',
      }),
    ),
  },
  { description: "The cluster's log and trace store. Wins over the same keys in spec.config." },
);

/** The HTTPS listeners: those the runtime serves over HTTPS with a certificate, metrics and probes aside. */
export const HTTPS_LISTENERS = ['ingress', 'admin', 'observability'] as const;
export type HttpsListenerName = (typeof HTTPS_LISTENERS)[number];

const TLS_SECRET =
  'A kubernetes.io/tls Secret (tls.crt, tls.key; ca.crt optional), e.g. made by a cert-manager Certificate.';

const ClientAuth = Type.Object(
  {
    caSecretRef: SecretKeySelector(
      'The CA bundle (PEM) client certificates must chain to. cert-manager puts the issuing CA in `ca.crt` of every ' +
        "Certificate's Secret, so the listeners' own Secret works when clients get their certificates from the same " +
        'issuer.',
      'ca.crt',
    ),
    listeners: Type.Optional(
      Type.Array(StringEnum(HTTPS_LISTENERS), {
        minItems: 1,
        maxItems: 3,
        'x-kubernetes-list-type': 'set',
        default: [...HTTPS_LISTENERS],
        description: 'The listeners that require a client certificate (default all three); each must have TLS.',
      }),
    ),
    operatorSecretRef: Type.Optional(
      LocalObjectReference(
        'A kubernetes.io/tls Secret with the client certificate the operator presents to the admin and ' +
          "observability listeners. Default: the listener's own key pair, which the runtime pods also present to " +
          'each other when forwarding (it must chain to the CA and allow client authentication).',
      ),
    ),
  },
  { description: 'Client-certificate verification (mutual TLS) on HTTPS listeners.' },
);

const Tls = Type.Object(
  {
    secretRef: Type.Optional(
      LocalObjectReference(
        `${TLS_SECRET} Serves ingress (8080), admin (9070), observability (3100) and, unless introspection is set, ` +
          'the SQL listener (9071). The runtime re-reads the files when the Secret changes: a renewed certificate ' +
          'does not restart the pods.',
      ),
    ),
    ingress: Type.Optional(LocalObjectReference(`${TLS_SECRET} For the ingress listener, instead of secretRef.`)),
    admin: Type.Optional(LocalObjectReference(`${TLS_SECRET} For the admin listener, instead of secretRef.`)),
    observability: Type.Optional(
      LocalObjectReference(`${TLS_SECRET} For the observability listener, instead of secretRef.`),
    ),
    introspection: Type.Optional(
      LocalObjectReference('A kubernetes.io/tls Secret (tls.crt, tls.key) for the SQL listener (9071).'),
    ),
    clientAuth: Type.Optional(ClientAuth),
  },
  {
    description: 'TLS of the runtime listeners. Without it they serve plain HTTP; metrics and probes (5122) always do.',
    ...cel({
      rule:
        "!has(self.clientAuth) || (has(self.clientAuth.listeners) ? self.clientAuth.listeners : ['ingress', 'admin', " +
        "'observability']).all(l, has(self.secretRef) || (l == 'ingress' && has(self.ingress)) || (l == 'admin' && " +
        "has(self.admin)) || (l == 'observability' && has(self.observability)))",
      message: "clientAuth needs TLS on each of its listeners (secretRef, or the listener's own Secret)",
    }),
  },
);

export const ClusterSpec = Type.Object(
  {
    image: Type.String({ minLength: 1, maxLength: 512, description: 'Runtime container image.' }),
    imagePullPolicy: Type.Optional(
      StringEnum(['Always', 'IfNotPresent', 'Never'] as const, { description: 'Pull policy of the runtime image.' }),
    ),
    imagePullSecrets: Type.Optional(OpaqueListByName('Image pull secrets.', 16)),
    replicas: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 100,
        default: 1,
        description: 'Runtime pods. Each owns about 1/replicas of the partitions; all state is in PostgreSQL.',
      }),
    ),
    database: Database,
    observability: Type.Optional(Observability),
    config: Type.Optional(
      Opaque(
        'Runtime configuration (the TOML file as an object: sections and kebab-case keys, e.g. {"storage": ' +
          '{"cleanup-interval": "5m"}, "invoker": {"inactivity-timeout": "2m"}}; every key is listed in the ' +
          "runtime's configuration reference). Listener binds, cluster name, database and auth are owned by the " +
          'operator.',
      ),
    ),
    services: Type.Optional(
      Type.Object({
        ingress: Type.Optional(ListenerService),
        admin: Type.Optional(ListenerService),
        introspection: Type.Optional(ListenerService),
        observability: Type.Optional(ListenerService),
      }),
    ),
    kafka: Type.Optional(
      Type.Object({
        clusters: Type.Array(KafkaCluster, {
          maxItems: 16,
          'x-kubernetes-list-type': 'map',
          'x-kubernetes-list-map-keys': ['name'],
        }),
      }),
    ),
    auth: Type.Optional(Auth),
    tls: Type.Optional(Tls),
    networkPolicy: Type.Optional(
      Type.Object({
        enabled: Type.Optional(Type.Boolean({ default: false })),
        allowFrom: Type.Optional(
          Type.Object({
            ingress: Type.Optional(OpaqueList('NetworkPolicyPeers allowed to reach the ingress (default: all).')),
            admin: Type.Optional(OpaqueList('Peers allowed to reach admin (default: the operator namespace).')),
            introspection: Type.Optional(OpaqueList('Peers allowed to reach introspection.')),
            observability: Type.Optional(OpaqueList('Peers allowed to reach observability.')),
          }),
        ),
      }),
    ),
    disruption: Type.Optional(
      Type.Object({
        maxUnavailable: Type.Optional(
          Type.Integer({
            minimum: 0,
            default: 1,
            description:
              'PodDisruptionBudget maxUnavailable; at most replicas - 1 (with 2 or more replicas), so that a drain ' +
              'always leaves a replica to own the partitions. 0 blocks every voluntary eviction, node drains included.',
          }),
        ),
      }),
    ),
    serviceAccount: Type.Optional(
      Type.Object(
        {
          create: Type.Optional(
            Type.Boolean({
              default: true,
              description: 'Create the ServiceAccount (false: use an existing one, or the namespace default).',
            }),
          ),
          name: Type.Optional(Name('ServiceAccount name (default: the cluster name).')),
          annotations: Type.Optional(
            StringMap({
              description:
                'Annotations of the ServiceAccount the operator creates, e.g. eks.amazonaws.com/role-arn (IRSA): the ' +
                "runtime's AWS role, which assumes a Lambda Deployment's assumeRoleArn with the cluster name as " +
                'external id. A change rolls the pods. Not used when create is false.',
            }),
          ),
        },
        { description: "The runtime pods' identity, e.g. for invoking AWS Lambda." },
      ),
    ),
    pod: Type.Optional(Pod),
    drainTimeout: Type.Optional(
      Duration(
        'The termination grace period of the runtime pods (rounded up to whole seconds) unless ' +
          'pod.terminationGracePeriodSeconds is set: the shutdown delay and the drain of in-flight requests share it.',
      ),
    ),
  },
  { description: 'A Ratchet runtime cluster.' },
);

const Endpoints = Type.Object({
  ingress: Type.Optional(Type.String()),
  admin: Type.Optional(Type.String()),
  introspection: Type.Optional(Type.String()),
  observability: Type.Optional(Type.String()),
});

export const ClusterStatus = Type.Object({
  observedGeneration: Type.Optional(Type.Integer()),
  conditions: Type.Optional(Conditions),
  replicas: Type.Optional(Type.Integer()),
  readyReplicas: Type.Optional(Type.Integer()),
  updatedReplicas: Type.Optional(Type.Integer()),
  version: Type.Optional(Type.String({ description: 'Runtime version, from the admin API /version.' })),
  adminApiVersions: Type.Optional(Type.Object({ min: Type.Integer(), max: Type.Integer() })),
  endpoints: Type.Optional(Endpoints),
  configHash: Type.Optional(
    Type.String({
      description:
        'Hash of the config and DSN the pods run with (not the TLS files, which the runtime re-reads when renewed).',
    }),
  ),
  tokenSecret: Type.Optional(Type.String({ description: 'Secret holding the access token (key `token`).' })),
});

export type ClusterSpec = Static<typeof ClusterSpec>;
export type ClusterStatus = Static<typeof ClusterStatus>;
