import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildCrds } from '../../../../operator/src/api/v1alpha1/crd.ts';
import { CrdValidator, REPO_ROOT, readRepoFile, readYamlDocs, type JsonObject } from './schema-tools.ts';

/*
 * Every sample a user copies validates as the API server would validate it (schema, defaults, strict fields, CEL), and
 * a set of typical mistakes is rejected with the message the user will see.
 */

const validators = new Map(buildCrds().map((crd) => [crd.spec.names.kind, new CrdValidator(crd)]));
const SAMPLES_DIR = 'operator/samples';
const sampleFiles = readdirSync(join(REPO_ROOT, SAMPLES_DIR))
  .filter((f) => f.endsWith('.yaml'))
  .sort();
const docs = sampleFiles.flatMap((file) =>
  readYamlDocs(readRepoFile(`${SAMPLES_DIR}/${file}`), file).map((doc) => ({ file, doc })),
);
const ours = docs.filter(({ doc }) => doc['apiVersion'] === 'ratchet.dev/v1alpha1');

function validate(doc: JsonObject, old?: JsonObject): string[] {
  const validator = validators.get(doc['kind'] as string);
  if (validator === undefined) throw new Error(`no CRD for kind ${JSON.stringify(doc['kind'])}`);
  return validator.errors(doc, old);
}

describe('operator/samples', () => {
  it('cover the documented cases', () => {
    const kinds = ours.map(({ doc }) => doc['kind']);
    expect(kinds.filter((k) => k === 'Cluster')).toHaveLength(3);
    expect(kinds).toContain('Deployment');
    expect(kinds).toContain('Subscription');
    const specs = ours.map(({ doc }) => JSON.stringify(doc['spec']));
    for (const feature of ['"bundled"', '"secretRef"', '"cnpg"', '"serviceRef"', '"uri"', '"valueFrom"', '"lambda"']) {
      expect(specs.some((s) => s.includes(feature)), feature).toBe(true);
    }
    expect(docs.some(({ doc }) => doc['kind'] === 'Namespace')).toBe(true);
  });

  it.each(ours.map(({ file, doc }) => [`${file}: ${doc['kind'] as string}`, doc] as const))(
    '%s is accepted by its CRD (schema, strict fields, CEL)',
    (_name, doc) => {
      expect(validate(doc)).toEqual([]);
      // An update that changes nothing passes the transition rules too.
      expect(validate(doc, doc)).toEqual([]);
    },
  );

  it('are all namespaced in ratchet-demo, with the published image names', () => {
    for (const { file, doc } of docs) {
      const metadata = doc['metadata'] as JsonObject;
      if (doc['kind'] === 'Namespace') expect(metadata['name'], file).toBe('ratchet-demo');
      else expect(metadata['namespace'], file).toBe('ratchet-demo');
    }
    for (const { file, doc } of ours.filter(({ doc }) => doc['kind'] === 'Cluster')) {
      expect((doc['spec'] as JsonObject)['image'], file).toBe('ghcr.io/ratchet-dev/ratchet-runtime:0.1.0');
    }
  });

  it('mark the bundled PostgreSQL as test-only', () => {
    const text = readRepoFile(`${SAMPLES_DIR}/cluster-bundled.yaml`);
    expect(text).toMatch(/TEST ONLY/);
  });

  it('reference only Secrets and Clusters that the samples define', () => {
    const names = (kind: string, apiVersion?: string) =>
      new Set(
        docs
          .filter(({ doc }) => doc['kind'] === kind && (apiVersion === undefined || doc['apiVersion'] === apiVersion))
          .map(({ doc }) => (doc['metadata'] as JsonObject)['name']),
      );
    const clusters = names('Cluster', 'ratchet.dev/v1alpha1');
    const secrets = names('Secret');
    for (const { file, doc } of ours) {
      const spec = doc['spec'] as JsonObject;
      const clusterRef = spec['clusterRef'] as JsonObject | undefined;
      if (clusterRef !== undefined) expect(clusters.has(clusterRef['name']), `${file}: clusterRef`).toBe(true);
      const text = JSON.stringify(spec);
      for (const m of text.matchAll(/"secretKeyRef":\{"name":"([^"]+)"/g)) expect(secrets.has(m[1]), file).toBe(true);
      const secretRef = (spec['database'] as JsonObject | undefined)?.['secretRef'] as JsonObject | undefined;
      if (secretRef !== undefined) expect(secrets.has(secretRef['name']), `${file}: secretRef`).toBe(true);
    }
  });
});

describe('invalid objects are rejected with the message the user sees', () => {
  const base = {
    cluster: {
      apiVersion: 'ratchet.dev/v1alpha1',
      kind: 'Cluster',
      metadata: { name: 'c', namespace: 'ratchet-demo' },
      spec: { image: 'ghcr.io/ratchet-dev/ratchet-runtime:0.1.0', database: { bundled: {} } },
    },
    deployment: {
      apiVersion: 'ratchet.dev/v1alpha1',
      kind: 'Deployment',
      metadata: { name: 'd', namespace: 'ratchet-demo' },
      spec: { clusterRef: { name: 'c' }, endpoint: { http: { serviceRef: { name: 'greeter', port: 9080 } } } },
    },
    subscription: {
      apiVersion: 'ratchet.dev/v1alpha1',
      kind: 'Subscription',
      metadata: { name: 's', namespace: 'ratchet-demo' },
      spec: {
        clusterRef: { name: 'c' },
        source: { kafka: { cluster: 'k', topic: 'orders' } },
        sink: { service: { name: 'OrderProcessor', handler: 'process' } },
      },
    },
  } satisfies Record<string, JsonObject>;

  const withSpec = (doc: JsonObject, spec: JsonObject): JsonObject => ({
    ...doc,
    spec: { ...(doc['spec'] as JsonObject), ...spec },
  });

  it('the bases are valid', () => {
    for (const doc of Object.values(base)) expect(validate(doc)).toEqual([]);
  });

  const cases: [string, JsonObject, string][] = [
    [
      'two database sources',
      withSpec(base.cluster, { database: { bundled: {}, secretRef: { name: 'db' } } }),
      'spec.database: exactly one of secretRef, cnpg, bundled must be set (database source)',
    ],
    [
      'no database source',
      withSpec(base.cluster, { database: { maxConnections: 10 } }),
      'spec.database: exactly one of secretRef, cnpg, bundled must be set (database source)',
    ],
    ['a Cluster without image', { ...base.cluster, spec: { database: { bundled: {} } } }, "spec: must have required property 'image'"],
    ['zero replicas', withSpec(base.cluster, { replicas: 0 }), 'spec.replicas: must be >= 1'],
    ['a misspelt field', withSpec(base.cluster, { replica: 2 }), 'spec.replica: unknown field "replica"'],
    [
      'a Kafka cluster declared twice',
      withSpec(base.cluster, {
        kafka: {
          clusters: [
            { name: 'k', bootstrapServers: ['a:9092'] },
            { name: 'k', bootstrapServers: ['b:9092'] },
          ],
        },
      }),
      'spec.kafka.clusters[1]: Duplicate value: ["k"]',
    ],
    [
      'an unqualified Lambda ARN',
      withSpec(base.deployment, { endpoint: { lambda: { arn: 'arn:aws:lambda:eu-central-1:123456789012:function:f' } } }),
      `spec.endpoint.lambda.arn: must match pattern "^arn:aws[a-zA-Z-]*:lambda:[a-z0-9-]+:[0-9]{12}:function:[A-Za-z0-9_-]+:[A-Za-z0-9_$-]+$"`,
    ],
    [
      'a header with both value and valueFrom',
      withSpec(base.deployment, {
        additionalHeaders: [{ name: 'x-api-key', value: 'v', valueFrom: { secretKeyRef: { name: 's', key: 'k' } } }],
      }),
      'spec.additionalHeaders[0]: exactly one of value, valueFrom must be set (header value)',
    ],
    [
      'the same header twice',
      withSpec(base.deployment, {
        additionalHeaders: [
          { name: 'x-a', value: '1' },
          { name: 'x-a', value: '2' },
        ],
      }),
      'spec.additionalHeaders[1]: Duplicate value: ["x-a"]',
    ],
    [
      'both clusterRef and adminUrl',
      withSpec(base.deployment, { adminUrl: 'https://admin.example.com' }),
      'spec: exactly one of clusterRef, adminUrl must be set (target runtime)',
    ],
    [
      'an admin token for a managed Cluster',
      withSpec(base.deployment, { adminTokenSecretRef: { name: 't' } }),
      'spec: at most one of clusterRef, adminTokenSecretRef may be set (adminTokenSecretRef is only for adminUrl)',
    ],
    [
      'both http and lambda',
      withSpec(base.deployment, {
        endpoint: {
          http: { uri: 'http://x:9080' },
          lambda: { arn: 'arn:aws:lambda:eu-central-1:123456789012:function:f:1' },
        },
      }),
      'spec.endpoint: exactly one of http, lambda must be set (endpoint kind)',
    ],
    [
      'both uri and serviceRef',
      withSpec(base.deployment, {
        endpoint: { http: { uri: 'http://x:9080', serviceRef: { name: 'x', port: 9080 } } },
      }),
      'spec.endpoint.http: exactly one of uri, serviceRef must be set (http endpoint)',
    ],
    [
      'a uri without scheme',
      withSpec(base.deployment, { endpoint: { http: { uri: 'greeter:9080' } } }),
      'spec.endpoint.http.uri: must match pattern "^https?://"',
    ],
    [
      'an unknown deletion policy',
      withSpec(base.deployment, { retirement: { deletionPolicy: 'Delete' } }),
      'spec.retirement.deletionPolicy: must be equal to one of the allowed values',
    ],
    [
      'a drain timeout in words',
      withSpec(base.deployment, { retirement: { drainTimeout: '1 hour' } }),
      'spec.retirement.drainTimeout: must match pattern "^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"',
    ],
    [
      'a shutdown delay over 30 s',
      withSpec(base.cluster, { pod: { shutdownDelaySeconds: 31 } }),
      'spec.pod.shutdownDelaySeconds: must be <= 30',
    ],
    [
      'a topic with a slash',
      withSpec(base.subscription, { source: { kafka: { cluster: 'k', topic: 'a/b' } } }),
      'spec.source.kafka.topic: must match pattern "^[a-zA-Z0-9._-]+$"',
    ],
  ];

  it.each(cases)('%s', (_name, doc, message) => {
    expect(validate(doc)).toContain(message);
  });

  it('a changed Subscription source or sink', () => {
    const moved = withSpec(base.subscription, { source: { kafka: { cluster: 'k', topic: 'payments' } } });
    expect(validate(moved, base.subscription)).toEqual(['spec.source: source is immutable']);
    const resunk = withSpec(base.subscription, { sink: { service: { name: 'OrderProcessor', handler: 'other' } } });
    expect(validate(resunk, base.subscription)).toEqual(['spec.sink: sink is immutable']);
  });

  it('gets the schema defaults the API server writes (what kubectl get -o yaml shows)', () => {
    const doc = withSpec(base.cluster, { database: { secretRef: { name: 'db' } } });
    const spec = validators.get('Cluster')!.defaulted(doc)['spec'] as JsonObject;
    expect(spec['replicas']).toBe(1);
    expect(spec['database']).toEqual({ secretRef: { name: 'db', key: 'uri' }, maxConnections: 20 });
    const pod = validators.get('Cluster')!.defaulted(withSpec(base.cluster, { pod: {} }))['spec'] as JsonObject;
    expect(pod['pod']).toEqual({ shutdownDelaySeconds: 5 });
    const retired = validators.get('Deployment')!.defaulted(withSpec(base.deployment, { retirement: {} }));
    expect((retired['spec'] as JsonObject)['retirement']).toEqual({ deletionPolicy: 'Drain', drainTimeout: '1h', gracePeriod: '5m' });
  });
});
