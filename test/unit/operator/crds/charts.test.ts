import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import { parse as parseYaml } from 'yaml';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildCrds } from '../../../../operator/src/api/v1alpha1/crd.ts';
import {
  EDIT_RULES,
  LEADER_ELECTION_RULES,
  OPERATOR_CLUSTER_RULES,
  OPERATOR_NAMESPACED_RULES,
  OPERATOR_RULES,
  VIEW_RULES,
  copyRule,
  type PolicyRule,
} from '../../../../operator/src/api/v1alpha1/rbac.ts';
import { CHART_RULE_TEMPLATES, PLAIN_INSTALL } from '../../../../operator/scripts/generated-files.ts';
import { TemplateSet, isTemplateFail, mergeValues, type ChartContext } from './helm-lite.ts';
import { REPO_ROOT, isObject, readRepoFile, readYamlDocs, type JsonObject } from './schema-tools.ts';

/*
 * No Helm binary exists here (spec/operator.md §4.6), so the charts are checked two ways: structurally (every template
 * parses as YAML with its `{{ }}` blocks stubbed, blocks balance, every `.Values` path and every `include` exists, the
 * values schema accepts values.yaml), and by rendering them with a small Go-template subset (helm-lite.ts) for a few
 * value sets and reading the objects: RBAC equals the TypeScript rules, the pod is locked down, optional objects
 * appear only when asked for.
 */

const OPERATOR_CHART = 'charts/ratchet-operator';
const CRD_CHART = 'charts/ratchet-operator-crds';
const CLUSTER_SCOPED = new Set(['ClusterRole', 'ClusterRoleBinding', 'CustomResourceDefinition', 'Namespace']);

function templateFiles(chart: string): string[] {
  return readdirSync(join(REPO_ROOT, chart, 'templates')).sort();
}

function readChartYaml(chart: string): JsonObject {
  return parseYaml(readRepoFile(`${chart}/Chart.yaml`)) as JsonObject;
}

function chartValues(chart: string): JsonObject {
  return (parseYaml(readRepoFile(`${chart}/values.yaml`)) ?? {}) as JsonObject;
}

/** Replaces every action with a scalar and drops lines that hold only actions, so the YAML around them parses. */
export function stubTemplate(text: string): string {
  const withoutComments = text.replace(/\{\{-?\s*\/\*[\s\S]*?\*\/\s*-?\}\}/g, '');
  return withoutComments
    .split('\n')
    .filter((line) => !/^\s*(\{\{[\s\S]*?\}\}\s*)+$/.test(line))
    .map((line) => line.replace(/\{\{[\s\S]*?\}\}/g, 'STUB'))
    .join('\n');
}

function actions(text: string): string[] {
  return [...text.matchAll(/\{\{-?\s*([\s\S]*?)\s*-?\}\}/g)].map((m) => m[1]!).filter((a) => !a.startsWith('/*'));
}

describe.each([OPERATOR_CHART, CRD_CHART])('%s, structure', (chart) => {
  const files = templateFiles(chart);
  const yamlFiles = files.filter((f) => f.endsWith('.yaml'));

  it.each(yamlFiles)('templates/%s parses as YAML with its template actions stubbed', (file) => {
    const docs = readYamlDocs(stubTemplate(readRepoFile(`${chart}/templates/${file}`)), file);
    expect(docs.length).toBeGreaterThan(0);
    for (const doc of docs) {
      expect(typeof doc['apiVersion'], file).toBe('string');
      expect(typeof doc['kind'], file).toBe('string');
      const metadata = doc['metadata'] as JsonObject;
      expect(metadata['name'], file).toBeDefined();
      // Helm does not add namespaces: a namespaced object without one lands wherever kubectl points.
      if (!CLUSTER_SCOPED.has(doc['kind'] as string)) expect(metadata['namespace'], `${file}: namespace`).toBeDefined();
    }
  });

  it('balances its blocks, and uses only defined templates and existing values', () => {
    const values = chartValues(chart);
    const sources = files.map((f) => [f, readRepoFile(`${chart}/templates/${f}`)] as const);
    const defined = new Set(sources.flatMap(([, t]) => [...t.matchAll(/define\s+"([^"]+)"/g)].map((m) => m[1]!)));
    const problems: string[] = [];
    for (const [file, text] of sources) {
      let depth = 0;
      for (const action of actions(text)) {
        if (/^(if|range|with|define|block)\b/.test(action)) depth += 1;
        if (/^end\b/.test(action)) depth -= 1;
        if (depth < 0) problems.push(`${file}: {{ end }} without a block`);
      }
      if (depth !== 0) problems.push(`${file}: ${depth} unclosed block(s)`);
      for (const m of text.matchAll(/include\s+"([^"]+)"/g)) {
        if (!defined.has(m[1]!)) problems.push(`${file}: include of undefined "${m[1]!}"`);
      }
      for (const m of text.matchAll(/(?<![\w$])\$?\.Values((?:\.\w+)+)/g)) {
        const missing = missingValuesPath(values, m[1]!.slice(1).split('.'));
        if (missing !== undefined) problems.push(`${file}: .Values${m[1]!} (no ${missing} in values.yaml)`);
      }
    }
    expect(problems).toEqual([]);
  });

  it('has a Chart.yaml Helm 3 can read, versioned in lockstep with the other chart', () => {
    const meta = readChartYaml(chart);
    expect(meta).toMatchObject({ apiVersion: 'v2', name: chart.split('/')[1], type: 'application' });
    expect(meta['version']).toBe(readChartYaml(OPERATOR_CHART)['version']);
    expect(meta['appVersion']).toBe(readChartYaml(CRD_CHART)['appVersion']);
  });
});

/** The first path segment that values.yaml does not have; maps that are empty by default take any key. */
function missingValuesPath(values: JsonObject, path: readonly string[]): string | undefined {
  let node: unknown = values;
  for (const [i, key] of path.entries()) {
    if (!isObject(node)) return undefined; // a list or scalar: the template reads inside user data
    if (!(key in node)) return Object.keys(node).length === 0 ? undefined : path.slice(0, i + 1).join('.');
    node = node[key];
  }
  return undefined;
}

describe('charts/ratchet-operator values', () => {
  const schema = JSON.parse(readRepoFile(`${OPERATOR_CHART}/values.schema.json`)) as JsonObject;
  const ajv = new Ajv({ allErrors: true, strict: false });
  const validate = ajv.compile(schema);
  const values = chartValues(OPERATOR_CHART);

  it('values.schema.json accepts values.yaml', () => {
    expect(validate(values), JSON.stringify(validate.errors)).toBe(true);
  });

  it.each([
    ['two replicas without leader election', { replicaCount: 2, leaderElection: { enabled: false } }],
    ['a misspelt top-level key', { replicas: 2 }],
    ['a duration in words', { config: { resyncPeriod: 'five minutes' } }],
    ['an invalid namespace', { watchNamespaces: ['Not_A_Namespace'] }],
    ['a port out of range', { health: { port: 70000 } }],
  ])('values.schema.json rejects %s', (_name, override) => {
    expect(validate(mergeValues(values, override))).toBe(false);
  });

  it('accepts one replica without leader election, and the subchart and global keys Helm passes', () => {
    expect(validate(mergeValues(values, { replicaCount: 1, leaderElection: { enabled: false } }))).toBe(true);
    expect(validate(mergeValues(values, { global: {}, 'ratchet-operator-crds': {} }))).toBe(true);
  });

  it('has the shape of spec/operator.md §4.2 and a hardened pod by default', () => {
    expect(values).toMatchObject({
      installCrds: true,
      image: { repository: 'ghcr.io/ratchet-dev/ratchet-operator', pullPolicy: 'IfNotPresent' },
      replicaCount: 2,
      leaderElection: { enabled: true, leaseDuration: '15s', renewDeadline: '10s', retryPeriod: '2s' },
      watchNamespaces: [],
      rbac: { create: true },
      serviceAccount: { create: true },
      podSecurityContext: { runAsNonRoot: true, runAsUser: 65532, seccompProfile: { type: 'RuntimeDefault' } },
      securityContext: {
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
        capabilities: { drop: ['ALL'] },
      },
      health: { port: 8081 },
      podDisruptionBudget: { enabled: true },
      networkPolicy: { enabled: false },
      metrics: { enabled: true, serviceMonitor: { enabled: false }, prometheusRule: { enabled: false } },
    });
  });

  it('depends on the CRD chart under the installCrds condition', () => {
    expect(readChartYaml(OPERATOR_CHART)['dependencies']).toEqual([
      {
        name: 'ratchet-operator-crds',
        version: readChartYaml(CRD_CHART)['version'],
        repository: 'file://../ratchet-operator-crds',
        condition: 'installCrds',
      },
    ]);
  });
});

describe('charts/ratchet-operator/templates/_rules.tpl', () => {
  it('holds exactly the rules of operator/src/api/v1alpha1/rbac.ts', () => {
    const text = readRepoFile(`${OPERATOR_CHART}/templates/_rules.tpl`);
    const defines = Object.fromEntries(
      [...text.matchAll(/\{\{- define "([^"]+)" -\}\}\n([\s\S]*?)\{\{- end \}\}/g)].map((m) => [m[1]!, parseYaml(m[2]!)]),
    );
    expect(defines).toEqual(
      Object.fromEntries(Object.entries(CHART_RULE_TEMPLATES).map(([name, rules]) => [name, rules.map(copyRule)])),
    );
  });
});

// ---------------------------------------------------------------------------------------------------------------
// Rendering

const RELEASE = { Name: 'ratchet-operator', Namespace: 'ratchet-system', Service: 'Helm' };

function loadChart(chart: string): TemplateSet {
  const set = new TemplateSet();
  for (const file of templateFiles(chart)) set.add(file, readRepoFile(`${chart}/templates/${file}`));
  return set;
}

function context(chart: string, overrides: JsonObject = {}, apiVersions: readonly string[] = []): ChartContext {
  const meta = readChartYaml(chart);
  return {
    Values: mergeValues(chartValues(chart), overrides),
    Release: RELEASE,
    Chart: { Name: meta['name'] as string, Version: meta['version'] as string, AppVersion: meta['appVersion'] as string },
    Capabilities: { APIVersions: { Has: (v: string) => apiVersions.includes(v) } },
  };
}

/** `helm template`: every non-partial template rendered, split into documents, empty ones dropped. */
function render(chart: string, overrides: JsonObject = {}, apiVersions: readonly string[] = []): JsonObject[] {
  const set = loadChart(chart);
  const ctx = context(chart, overrides, apiVersions);
  return templateFiles(chart)
    .filter((f) => !f.startsWith('_') && f.endsWith('.yaml'))
    .flatMap((f) => readYamlDocs(set.render(f, ctx), f));
}

function find(docs: JsonObject[], kind: string, name?: string): JsonObject[] {
  return docs.filter(
    (d) => d['kind'] === kind && (name === undefined || (d['metadata'] as JsonObject)['name'] === name),
  );
}

function one(docs: JsonObject[], kind: string, name?: string): JsonObject {
  const found = find(docs, kind, name);
  expect(found, `${kind} ${name ?? ''}`).toHaveLength(1);
  return found[0]!;
}

const rules = (list: readonly PolicyRule[]) => list.map(copyRule);

function podSpec(deployment: JsonObject): JsonObject {
  return ((deployment['spec'] as JsonObject)['template'] as JsonObject)['spec'] as JsonObject;
}

function container(deployment: JsonObject): JsonObject {
  return (podSpec(deployment)['containers'] as JsonObject[])[0]!;
}

function env(deployment: JsonObject): Record<string, unknown> {
  return Object.fromEntries(
    (container(deployment)['env'] as JsonObject[]).map((e) => [e['name'] as string, e['value'] ?? e['valueFrom']]),
  );
}

/** What every operator pod must have, from the chart or from operator/deploy/. */
function expectHardenedOperatorPod(deployment: JsonObject): void {
  const pod = podSpec(deployment);
  expect(pod['securityContext']).toMatchObject({
    runAsNonRoot: true,
    runAsUser: 65532,
    seccompProfile: { type: 'RuntimeDefault' },
  });
  const c = container(deployment);
  expect(c['securityContext']).toMatchObject({
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: true,
    capabilities: { drop: ['ALL'] },
  });
  expect(c['ports']).toEqual([{ name: 'http', containerPort: 8081, protocol: 'TCP' }]);
  expect(c['livenessProbe']).toMatchObject({ httpGet: { path: '/healthz', port: 'http' } });
  expect(c['readinessProbe']).toMatchObject({ httpGet: { path: '/readyz', port: 'http' } });
  const vars = env(deployment);
  expect(vars['POD_NAME']).toEqual({ fieldRef: { fieldPath: 'metadata.name' } });
  expect(vars['RATCHET_OPERATOR_NAMESPACE']).toEqual({ fieldRef: { fieldPath: 'metadata.namespace' } });
  expect(vars['RATCHET_OPERATOR_HEALTH_BIND']).toBe('0.0.0.0:8081');
  for (const name of Object.keys(vars)) expect(name).toMatch(/^(POD_NAME|RATCHET_OPERATOR_[A-Z_]+)$/);
  expect(pod['volumes']).toContainEqual({ name: 'tmp', emptyDir: { sizeLimit: '64Mi' } });
}

describe('charts/ratchet-operator rendered (helm-lite)', () => {
  let defaults: JsonObject[];
  beforeAll(() => {
    defaults = render(OPERATOR_CHART);
  });

  it('renders the default objects, and no optional ones', () => {
    const kinds = defaults.map((d) => `${d['kind'] as string}/${(d['metadata'] as JsonObject)['name'] as string}`);
    expect(kinds.sort()).toEqual(
      [
        'ClusterRole/ratchet-operator',
        'ClusterRole/ratchet-operator-edit',
        'ClusterRole/ratchet-operator-view',
        'ClusterRoleBinding/ratchet-operator',
        'Deployment/ratchet-operator',
        'PodDisruptionBudget/ratchet-operator',
        'Role/ratchet-operator-leader-election',
        'RoleBinding/ratchet-operator-leader-election',
        'Service/ratchet-operator-metrics',
        'ServiceAccount/ratchet-operator',
      ].sort(),
    );
    for (const doc of defaults) {
      const metadata = doc['metadata'] as JsonObject;
      expect(metadata['labels'], `${doc['kind'] as string} labels`).toMatchObject({
        'app.kubernetes.io/name': 'ratchet-operator',
        'app.kubernetes.io/instance': 'ratchet-operator',
        'app.kubernetes.io/managed-by': 'Helm',
        'helm.sh/chart': 'ratchet-operator-0.1.0',
      });
      if (!CLUSTER_SCOPED.has(doc['kind'] as string)) expect(metadata['namespace']).toBe('ratchet-system');
    }
  });

  it('grants the operator exactly OPERATOR_RULES cluster-wide and the Lease rules in its namespace', () => {
    expect(one(defaults, 'ClusterRole', 'ratchet-operator')['rules']).toEqual(rules(OPERATOR_RULES));
    const binding = one(defaults, 'ClusterRoleBinding', 'ratchet-operator');
    expect(binding['roleRef']).toEqual({
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'ClusterRole',
      name: 'ratchet-operator',
    });
    expect(binding['subjects']).toEqual([{ kind: 'ServiceAccount', name: 'ratchet-operator', namespace: 'ratchet-system' }]);
    const lease = one(defaults, 'Role', 'ratchet-operator-leader-election');
    expect(lease['rules']).toEqual(rules(LEADER_ELECTION_RULES));
    expect((lease['metadata'] as JsonObject)['namespace']).toBe('ratchet-system');
    expect(one(defaults, 'RoleBinding', 'ratchet-operator-leader-election')['subjects']).toEqual([
      { kind: 'ServiceAccount', name: 'ratchet-operator', namespace: 'ratchet-system' },
    ]);
  });

  it('aggregates view and edit roles for end users into the built-in roles', () => {
    const view = one(defaults, 'ClusterRole', 'ratchet-operator-view');
    expect(view['rules']).toEqual(rules(VIEW_RULES));
    expect((view['metadata'] as JsonObject)['labels']).toMatchObject({ 'rbac.authorization.k8s.io/aggregate-to-view': 'true' });
    const edit = one(defaults, 'ClusterRole', 'ratchet-operator-edit');
    expect(edit['rules']).toEqual(rules(EDIT_RULES));
    expect((edit['metadata'] as JsonObject)['labels']).toMatchObject({ 'rbac.authorization.k8s.io/aggregate-to-edit': 'true' });
  });

  it('runs two hardened replicas with leader election, configured through RATCHET_OPERATOR_* variables', () => {
    const deployment = one(defaults, 'Deployment', 'ratchet-operator');
    expect((deployment['spec'] as JsonObject)['replicas']).toBe(2);
    expect(container(deployment)['image']).toBe('ghcr.io/ratchet-dev/ratchet-operator:0.1.0');
    expect(podSpec(deployment)['serviceAccountName']).toBe('ratchet-operator');
    expectHardenedOperatorPod(deployment);
    expect(env(deployment)).toMatchObject({
      RATCHET_OPERATOR_WATCH_NAMESPACES: '',
      RATCHET_OPERATOR_LEADER_ELECTION: 'true',
      RATCHET_OPERATOR_LEASE_NAME: 'ratchet-operator-leader',
      RATCHET_OPERATOR_LEASE_DURATION: '15s',
      RATCHET_OPERATOR_RESYNC_PERIOD: '5m',
      RATCHET_OPERATOR_MAX_CONCURRENT_RECONCILES: '4',
      RATCHET_OPERATOR_CLUSTER_DOMAIN: 'cluster.local',
      RATCHET_OPERATOR_LOG_LEVEL: 'info',
    });
    const selector = ((deployment['spec'] as JsonObject)['selector'] as JsonObject)['matchLabels'];
    expect(one(defaults, 'Service')['spec']).toMatchObject({
      selector,
      ports: [{ name: 'http-metrics', port: 8081, targetPort: 'http', protocol: 'TCP' }],
    });
    expect(one(defaults, 'PodDisruptionBudget')['spec']).toEqual({ minAvailable: 1, selector: { matchLabels: selector } });
  });

  it('with watchNamespaces: Roles per namespace with the namespaced rules, a ClusterRole for CRDs only', () => {
    const docs = render(OPERATOR_CHART, { watchNamespaces: ['team-a', 'team-b'] });
    expect(one(docs, 'ClusterRole', 'ratchet-operator')['rules']).toEqual(rules(OPERATOR_CLUSTER_RULES));
    const roles = find(docs, 'Role', 'ratchet-operator');
    expect(roles.map((r) => (r['metadata'] as JsonObject)['namespace'])).toEqual(['team-a', 'team-b']);
    for (const role of roles) expect(role['rules']).toEqual(rules(OPERATOR_NAMESPACED_RULES));
    const bindings = find(docs, 'RoleBinding', 'ratchet-operator');
    expect(bindings.map((b) => (b['metadata'] as JsonObject)['namespace'])).toEqual(['team-a', 'team-b']);
    for (const b of bindings) {
      expect(b['subjects']).toEqual([{ kind: 'ServiceAccount', name: 'ratchet-operator', namespace: 'ratchet-system' }]);
    }
    expect(env(one(docs, 'Deployment'))['RATCHET_OPERATOR_WATCH_NAMESPACES']).toBe('team-a,team-b');
  });

  it('renders the ServiceMonitor only when enabled and Prometheus Operator is installed', () => {
    const enabled = { metrics: { serviceMonitor: { enabled: true } } };
    expect(find(render(OPERATOR_CHART, enabled), 'ServiceMonitor')).toEqual([]);
    const docs = render(OPERATOR_CHART, enabled, ['monitoring.coreos.com/v1']);
    expect(one(docs, 'ServiceMonitor')['spec']).toMatchObject({
      endpoints: [{ port: 'http-metrics', path: '/metrics', interval: '30s' }],
      namespaceSelector: { matchNames: ['ratchet-system'] },
    });
    expect(find(render(OPERATOR_CHART, {}, ['monitoring.coreos.com/v1']), 'ServiceMonitor')).toEqual([]);
  });

  it('renders a NetworkPolicy that keeps DNS, the API server and the runtime admin API reachable', () => {
    const policy = one(render(OPERATOR_CHART, { networkPolicy: { enabled: true } }), 'NetworkPolicy');
    const egressPorts = ((policy['spec'] as JsonObject)['egress'] as JsonObject[]).flatMap((e) => e['ports'] as JsonObject[]);
    expect(egressPorts).toEqual(
      expect.arrayContaining([
        { port: 53, protocol: 'UDP' },
        { port: 53, protocol: 'TCP' },
        { port: 443, protocol: 'TCP' },
        { port: 9070, protocol: 'TCP' },
      ]),
    );
  });

  it('drops the PDB for one replica, RBAC when rbac.create=false, and refuses two replicas without a leader', () => {
    const single = render(OPERATOR_CHART, { replicaCount: 1, leaderElection: { enabled: false } });
    expect(find(single, 'PodDisruptionBudget')).toEqual([]);
    expect(find(single, 'Role')).toEqual([]);
    expect(env(one(single, 'Deployment'))['RATCHET_OPERATOR_LEADER_ELECTION']).toBe('false');
    const noRbac = render(OPERATOR_CHART, { rbac: { create: false } });
    expect(noRbac.filter((d) => /Role/.test(d['kind'] as string))).toEqual([]);
    let failure: unknown;
    try {
      render(OPERATOR_CHART, { leaderElection: { enabled: false } });
    } catch (err) {
      failure = err;
    }
    expect(isTemplateFail(failure) && failure.message).toMatch(/needs leaderElection.enabled=true/);
  });

  it('passes extra args, env and pod settings through', () => {
    const deployment = one(
      render(OPERATOR_CHART, {
        extraArgs: ['--inspect=0'],
        extraEnv: [{ name: 'NODE_OPTIONS', value: '--max-old-space-size=256' }],
        podAnnotations: { 'example.com/a': 'b' },
        nodeSelector: { 'kubernetes.io/os': 'linux' },
        image: { tag: 'dev', pullPolicy: 'Never' },
      }),
      'Deployment',
    );
    expect(container(deployment)).toMatchObject({
      image: 'ghcr.io/ratchet-dev/ratchet-operator:dev',
      imagePullPolicy: 'Never',
      args: ['--inspect=0'],
    });
    expect(container(deployment)['env']).toContainEqual({ name: 'NODE_OPTIONS', value: '--max-old-space-size=256' });
    expect(podSpec(deployment)['nodeSelector']).toEqual({ 'kubernetes.io/os': 'linux' });
    expect(((deployment['spec'] as JsonObject)['template'] as JsonObject)['metadata']).toMatchObject({
      annotations: { 'example.com/a': 'b' },
    });
  });

  it('renders NOTES.txt', () => {
    const notes = loadChart(OPERATOR_CHART).render('NOTES.txt', context(OPERATOR_CHART));
    expect(notes).toContain('kubectl -n ratchet-demo wait --for=condition=Ready cluster.ratchet.dev/ratchet-test');
    expect(notes).not.toMatch(/\{\{|<no value>/);
  });
});

describe('charts/ratchet-operator-crds rendered (helm-lite)', () => {
  it('renders the generated CRDs with helm.sh/resource-policy: keep, so upgrades update them and uninstall keeps them', () => {
    const docs = render(CRD_CHART);
    const crds = buildCrds();
    expect(docs.map((d) => (d['metadata'] as JsonObject)['name'])).toEqual(crds.map((c) => c.metadata.name).sort());
    for (const doc of docs) {
      const crd = crds.find((c) => c.metadata.name === (doc['metadata'] as JsonObject)['name'])!;
      expect(doc['spec']).toEqual(JSON.parse(JSON.stringify(crd.spec)));
      expect(doc['metadata']).toMatchObject({
        annotations: { 'helm.sh/resource-policy': 'keep' },
        labels: { 'app.kubernetes.io/managed-by': 'Helm', 'helm.sh/chart': 'ratchet-operator-crds-0.1.0' },
      });
    }
  });

  it('keeps them out of the Helm crds/ directory (install-only there, the cause of restate-operator #167)', () => {
    expect(readdirSync(join(REPO_ROOT, CRD_CHART))).not.toContain('crds');
    expect(readdirSync(join(REPO_ROOT, OPERATOR_CHART))).not.toContain('crds');
  });
});

describe('operator/deploy (the install without Helm)', () => {
  const kustomization = parseYaml(readRepoFile('operator/deploy/kustomization.yaml')) as JsonObject;
  const docs = (kustomization['resources'] as string[]).flatMap((f) =>
    readYamlDocs(readRepoFile(`operator/deploy/${f}`), f),
  );

  it('lists every manifest of the directory in its kustomization', () => {
    const files = readdirSync(join(REPO_ROOT, 'operator/deploy')).filter((f) => f !== 'kustomization.yaml');
    expect([...(kustomization['resources'] as string[])].sort()).toEqual(files.sort());
  });

  it('runs the same hardened pod as the chart, under the generated RBAC', () => {
    const deployment = one(docs, 'Deployment', PLAIN_INSTALL.name);
    expectHardenedOperatorPod(deployment);
    expect(podSpec(deployment)['serviceAccountName']).toBe(PLAIN_INSTALL.name);
    expect(container(deployment)['image']).toBe('ghcr.io/ratchet-dev/ratchet-operator:0.1.0');
    const chartEnv = Object.keys(env(one(render(OPERATOR_CHART), 'Deployment')));
    for (const name of Object.keys(env(deployment))) expect(chartEnv).toContain(name);
    expect(one(docs, 'ClusterRole', PLAIN_INSTALL.name)['rules']).toEqual(rules(OPERATOR_RULES));
    expect(one(docs, 'Role')['rules']).toEqual(rules(LEADER_ELECTION_RULES));
    for (const doc of docs) {
      if (!CLUSTER_SCOPED.has(doc['kind'] as string)) {
        expect((doc['metadata'] as JsonObject)['namespace']).toBe(PLAIN_INSTALL.namespace);
      }
    }
    expect(one(docs, 'Namespace', PLAIN_INSTALL.namespace)).toBeDefined();
  });
});
