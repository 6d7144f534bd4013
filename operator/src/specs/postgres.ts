import type { Cluster } from '../api/v1alpha1/index.ts';
import { childMeta, DESCRIPTION_ANNOTATION, TEST_ONLY_ANNOTATION } from './meta.ts';
import { clusterLabels, clusterNames, selectorLabels } from './names.ts';
import type { ServiceObject, StatefulSetObject } from './objects.ts';
import { BUNDLED_POSTGRES_DESCRIPTION, POSTGRES_DATABASE, POSTGRES_PORT, POSTGRES_USER } from './secret.ts';
import { DEFAULT_POSTGRES_IMAGE, DEFAULT_POSTGRES_STORAGE } from './settings.ts';

/*
 * spec.database.bundled: one PostgreSQL pod for test clusters (kind, CI, previews). Not for production, and marked so
 * on every object: no backups, no failover, no version upgrades, and its volume is deleted with the StatefulSet.
 */

export const POSTGRES_COMPONENT = 'postgres';
/** The `postgres` user of the alpine images; the debian images accept any uid through nss_wrapper. */
const POSTGRES_UID = 70;
const DATA_MOUNT = '/var/lib/postgresql/data';

const TEST_ONLY = { [TEST_ONLY_ANNOTATION]: 'true', [DESCRIPTION_ANNOTATION]: BUNDLED_POSTGRES_DESCRIPTION };

function meta(cluster: Cluster) {
  return childMeta(cluster, clusterNames.postgres(cluster.metadata.name), {
    component: POSTGRES_COMPONENT,
    annotations: TEST_ONLY,
  });
}

function secretEnv(name: string, secret: string, key: string) {
  return { name, valueFrom: { secretKeyRef: { name: secret, key } } };
}

const PG_ISREADY = ['pg_isready', '-h', '127.0.0.1', '-U', POSTGRES_USER, '-d', POSTGRES_DATABASE];

export function buildPostgresStatefulSet(cluster: Cluster): StatefulSetObject | undefined {
  const bundled = cluster.spec.database.bundled;
  if (bundled === undefined) return undefined;
  const name = cluster.metadata.name;
  const pgName = clusterNames.postgres(name);
  const claim: Record<string, unknown> = {
    metadata: { name: 'data', labels: clusterLabels(name, POSTGRES_COMPONENT) },
    spec: {
      accessModes: ['ReadWriteOnce'],
      resources: { requests: { storage: bundled.storageSize ?? DEFAULT_POSTGRES_STORAGE } },
      ...(bundled.storageClassName === undefined ? {} : { storageClassName: bundled.storageClassName }),
    },
  };
  return {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: meta(cluster),
    spec: {
      replicas: 1,
      serviceName: pgName,
      selector: { matchLabels: selectorLabels(name, POSTGRES_COMPONENT) },
      template: {
        metadata: { labels: clusterLabels(name, POSTGRES_COMPONENT), annotations: { ...TEST_ONLY } },
        spec: {
          containers: [
            {
              name: 'postgres',
              image: bundled.image ?? DEFAULT_POSTGRES_IMAGE,
              ports: [{ name: 'postgres', containerPort: POSTGRES_PORT, protocol: 'TCP' }],
              env: [
                secretEnv('POSTGRES_USER', pgName, 'username'),
                secretEnv('POSTGRES_PASSWORD', pgName, 'password'),
                secretEnv('POSTGRES_DB', pgName, 'database'),
                // A subdirectory: the volume's root may hold lost+found, which initdb refuses.
                { name: 'PGDATA', value: `${DATA_MOUNT}/pgdata` },
              ],
              volumeMounts: [{ name: 'data', mountPath: DATA_MOUNT }],
              readinessProbe: {
                exec: { command: PG_ISREADY },
                periodSeconds: 5,
                timeoutSeconds: 3,
                failureThreshold: 3,
              },
              livenessProbe: {
                exec: { command: PG_ISREADY },
                initialDelaySeconds: 30,
                periodSeconds: 10,
                timeoutSeconds: 5,
                failureThreshold: 6,
              },
              securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
            },
          ],
          volumes: [],
          securityContext: {
            runAsNonRoot: true,
            runAsUser: POSTGRES_UID,
            runAsGroup: POSTGRES_UID,
            fsGroup: POSTGRES_UID,
            seccompProfile: { type: 'RuntimeDefault' },
          },
          automountServiceAccountToken: false,
          enableServiceLinks: false,
        },
      },
      volumeClaimTemplates: [claim],
      // Test data only: switching away from the bundled database or deleting the Cluster removes the volume too.
      persistentVolumeClaimRetentionPolicy: { whenDeleted: 'Delete', whenScaled: 'Retain' },
    },
  };
}

export function buildPostgresService(cluster: Cluster): ServiceObject | undefined {
  if (cluster.spec.database.bundled === undefined) return undefined;
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: meta(cluster),
    spec: {
      type: 'ClusterIP',
      selector: selectorLabels(cluster.metadata.name, POSTGRES_COMPONENT),
      ports: [
        { name: 'postgres', port: POSTGRES_PORT, targetPort: 'postgres', protocol: 'TCP', appProtocol: 'postgresql' },
      ],
    },
  };
}
