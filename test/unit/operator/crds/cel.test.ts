import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { buildCrds, type CustomResourceDefinition, type JsonSchema } from '../../../../operator/src/api/v1alpha1/crd.ts';
import {
  CrdValidator,
  allCelRules,
  celViolations,
  compileProblems,
  isTransitionRule,
  openApiSchema,
  type JsonObject,
} from './schema-tools.ts';

/*
 * The CEL rules are the part of validation no OpenAPI keyword can express, and the part most easily lost in a schema
 * refactor (restate-operator's lesson). Each must exist at the right node, compile against that node's schema, and
 * accept and reject what it says it does, evaluated by @bufbuild/cel with the API server's bindings.
 */

const crds = Object.fromEntries(buildCrds().map((c) => [c.spec.names.kind, c])) as Record<
  'Cluster' | 'Deployment' | 'Subscription',
  CustomResourceDefinition
>;
const validators = {
  Cluster: new CrdValidator(crds.Cluster),
  Deployment: new CrdValidator(crds.Deployment),
  Subscription: new CrdValidator(crds.Subscription),
};

const EXPECTED_RULES = {
  Cluster: [
    ['.spec.database', 'exactly one of secretRef, cnpg, bundled must be set (database source)'],
    ['.spec.database.bundled.storageClassName', 'storageClassName is immutable'],
    ['.spec.tls', "clientAuth needs TLS on each of its listeners (secretRef, or the listener's own Secret)"],
  ],
  Deployment: [
    ['.spec', 'exactly one of clusterRef, adminUrl must be set (target runtime)'],
    [
      '.spec',
      'at most one of clusterRef, adminTokenSecretRef may be set (adminTokenSecretRef is only for adminUrl)',
    ],
    ['.spec.endpoint', 'exactly one of http, lambda must be set (endpoint kind)'],
    ['.spec.endpoint.http', 'exactly one of uri, serviceRef must be set (http endpoint)'],
    ['.spec.additionalHeaders[*]', 'exactly one of value, valueFrom must be set (header value)'],
  ],
  Subscription: [
    ['.spec.source', 'source is immutable'],
    ['.spec.sink', 'sink is immutable'],
  ],
} as const;

const meta = (name: string) => ({ name, namespace: 'ratchet-demo' });

function cluster(spec: JsonObject): JsonObject {
  return { apiVersion: 'ratchet.dev/v1alpha1', kind: 'Cluster', metadata: meta('c'), spec: { image: 'img:1', ...spec } };
}

function deployment(spec: JsonObject): JsonObject {
  return { apiVersion: 'ratchet.dev/v1alpha1', kind: 'Deployment', metadata: meta('d'), spec };
}

function subscription(spec: JsonObject): JsonObject {
  return { apiVersion: 'ratchet.dev/v1alpha1', kind: 'Subscription', metadata: meta('s'), spec };
}

const HTTP = { http: { uri: 'http://greeter.ratchet-demo.svc:9080' } };

describe.each(Object.keys(EXPECTED_RULES) as (keyof typeof EXPECTED_RULES)[])('%s CEL rules', (kind) => {
  const rules = allCelRules(openApiSchema(crds[kind]));

  it('are exactly the expected ones, at the expected nodes', () => {
    expect(rules.map(({ path, rule }) => [path, rule.message])).toEqual(EXPECTED_RULES[kind]);
  });

  it('compile against the schema of their node', () => {
    for (const { path, schema, rule } of rules) {
      expect(compileProblems(rule.rule, schema), `${path}: ${rule.rule}`).toEqual([]);
    }
  });
});

describe('the CEL compile check', () => {
  const schema: JsonSchema = { type: 'object', properties: { secretRef: { type: 'object' } } };

  it('rejects syntax errors, unknown fields, unknown functions and free variables', () => {
    expect(compileProblems('has(self.secretRef) &&', schema)[0]).toMatch(/^syntax/);
    expect(compileProblems('has(self.secretref)', schema)).toEqual([
      "undefined field 'secretref' (in self.secretref)",
    ]);
    expect(compileProblems('frobnicate(self)', schema)).toEqual(["found no matching overload for 'frobnicate'"]);
    expect(compileProblems('other == self', schema)).toEqual(["undeclared reference to 'other'"]);
    expect(compileProblems('self.all(x, has(x.name))', { type: 'array', items: { type: 'object' } })).toEqual([]);
  });

  it('tells transition rules (oldSelf) from plain ones', () => {
    expect(isTransitionRule('self == oldSelf')).toBe(true);
    expect(isTransitionRule('has(self.a)')).toBe(false);
  });
});

describe('CEL rules evaluated', () => {
  const databaseSources = {
    secretRef: { name: 'db', key: 'uri' },
    cnpg: { clusterName: 'pg' },
    bundled: {},
  };

  it('Cluster.spec.database: accepts exactly one source, for every combination', () => {
    fc.assert(
      fc.property(fc.subarray(Object.keys(databaseSources) as (keyof typeof databaseSources)[]), (chosen) => {
        const database = Object.fromEntries(chosen.map((k) => [k, databaseSources[k]])) as JsonObject;
        const errors = validators.Cluster.errors(cluster({ database }));
        const rule = 'spec.database: exactly one of secretRef, cnpg, bundled must be set (database source)';
        expect(errors.includes(rule)).toBe(chosen.length !== 1);
        if (chosen.length === 1) expect(errors).toEqual([]);
      }),
    );
  });

  it('Cluster.spec.tls: clientAuth only on listeners that serve TLS, by secretRef or their own Secret', () => {
    const listeners = ['ingress', 'admin', 'observability'] as const;
    fc.assert(
      fc.property(
        fc.boolean(),
        fc.subarray([...listeners]),
        fc.option(fc.subarray([...listeners], { minLength: 1 }), { nil: undefined }),
        (shared, own, verified) => {
          const tls: JsonObject = { clientAuth: { caSecretRef: { name: 'ca' } } };
          if (verified !== undefined) (tls['clientAuth'] as JsonObject)['listeners'] = verified;
          if (shared) tls['secretRef'] = { name: 'tls' };
          for (const l of own) tls[l] = { name: `${l}-tls` };
          const errors = validators.Cluster.errors(cluster({ database: { bundled: {} }, tls }));
          // The API server applies the default (all three) before the rule runs.
          const valid = shared || (verified ?? listeners).every((l) => own.includes(l));
          expect(errors, JSON.stringify(tls)).toEqual(
            valid
              ? []
              : ["spec.tls: clientAuth needs TLS on each of its listeners (secretRef, or the listener's own Secret)"],
          );
        },
      ),
    );
    expect(validators.Cluster.errors(cluster({ database: { bundled: {} }, tls: { secretRef: { name: 't' } } }))).toEqual(
      [],
    );
  });

  it('Deployment.spec: exactly one of clusterRef and adminUrl, and adminTokenSecretRef only with adminUrl', () => {
    fc.assert(
      fc.property(fc.boolean(), fc.boolean(), fc.boolean(), (clusterRef, adminUrl, token) => {
        const spec: JsonObject = { endpoint: HTTP };
        if (clusterRef) spec['clusterRef'] = { name: 'c' };
        if (adminUrl) spec['adminUrl'] = 'https://admin.example.com';
        if (token) spec['adminTokenSecretRef'] = { name: 'admin-token' };
        const errors = validators.Deployment.errors(deployment(spec));
        const valid = clusterRef !== adminUrl && !(clusterRef && token);
        expect(errors.length === 0, JSON.stringify(errors)).toBe(valid);
      }),
    );
  });

  it('Deployment endpoint: http or lambda, and http by uri or serviceRef', () => {
    fc.assert(
      fc.property(fc.boolean(), fc.boolean(), fc.boolean(), (http, lambda, both) => {
        const endpoint: JsonObject = {};
        if (http) {
          endpoint['http'] = both
            ? { uri: 'http://x:9080', serviceRef: { name: 'x', port: 9080 } }
            : { serviceRef: { name: 'x', port: 9080 } };
        }
        if (lambda) endpoint['lambda'] = { arn: 'arn:aws:lambda:eu-central-1:123456789012:function:f:1' };
        const errors = validators.Deployment.errors(deployment({ clusterRef: { name: 'c' }, endpoint }));
        const valid = http !== lambda && !(http && both);
        expect(errors.length === 0, JSON.stringify(errors)).toBe(valid);
      }),
    );
  });

  it('Deployment header: value or valueFrom, never both, never neither', () => {
    fc.assert(
      fc.property(fc.boolean(), fc.boolean(), (value, valueFrom) => {
        const header: JsonObject = { name: 'x-api-key' };
        if (value) header['value'] = 'v';
        if (valueFrom) header['valueFrom'] = { secretKeyRef: { name: 's', key: 'k' } };
        const errors = validators.Deployment.errors(
          deployment({ clusterRef: { name: 'c' }, endpoint: HTTP, additionalHeaders: [header] }),
        );
        expect(errors).toEqual(
          value !== valueFrom
            ? []
            : ['spec.additionalHeaders[0]: exactly one of value, valueFrom must be set (header value)'],
        );
      }),
    );
  });

  const kafkaName = fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?$/);
  const topic = fc.stringMatching(/^[a-zA-Z0-9._-]{1,20}$/);

  it('Subscription source and sink: an update keeps them or is rejected; creation is never a transition', () => {
    fc.assert(
      fc.property(kafkaName, topic, kafkaName, topic, fc.boolean(), (c1, t1, c2, t2, changeSink) => {
        const spec = (cluster: string, t: string, handler: string): JsonObject => ({
          clusterRef: { name: 'ratchet' },
          source: { kafka: { cluster, topic: t } },
          sink: { service: { name: 'OrderProcessor', handler } },
        });
        const before = subscription(spec(c1, t1, 'process'));
        const after = subscription(spec(c2, t2, changeSink ? 'other' : 'process'));
        expect(validators.Subscription.errors(after)).toEqual([]);
        const errors = validators.Subscription.errors(after, before);
        const expected = [
          ...(c1 === c2 && t1 === t2 ? [] : ['spec.source: source is immutable']),
          ...(changeSink ? ['spec.sink: sink is immutable'] : []),
        ];
        expect(errors).toEqual(expected);
      }),
    );
  });

  it('Subscription: changing options is allowed (the operator recreates the subscription)', () => {
    const spec: JsonObject = {
      clusterRef: { name: 'ratchet' },
      source: { kafka: { cluster: 'k', topic: 'orders' } },
      sink: { service: { name: 'S', handler: 'h' } },
    };
    const before = subscription({ ...spec, options: { 'auto.offset.reset': 'latest' } });
    const after = subscription({ ...spec, options: { 'auto.offset.reset': 'earliest' } });
    expect(validators.Subscription.errors(after, before)).toEqual([]);
  });

  it('Cluster bundled storageClassName: may be set on create, never changed after', () => {
    const withClass = (storageClassName: string) => cluster({ database: { bundled: { storageClassName } } });
    expect(validators.Cluster.errors(withClass('standard'))).toEqual([]);
    expect(validators.Cluster.errors(withClass('standard'), withClass('standard'))).toEqual([]);
    expect(validators.Cluster.errors(withClass('fast'), withClass('standard'))).toEqual([
      'spec.database.bundled.storageClassName: storageClassName is immutable',
    ]);
  });

  it('evaluates rules on list-map items correlated with their old item by key', () => {
    const schema = openApiSchema(crds.Deployment);
    const header = (value: string): JsonObject =>
      deployment({ clusterRef: { name: 'c' }, endpoint: HTTP, additionalHeaders: [{ name: 'a', value }] });
    expect(celViolations(schema, header('1'), header('2'))).toEqual([]);
  });
});
