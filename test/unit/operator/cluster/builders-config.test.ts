import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { parse } from 'smol-toml';
import { describe, expect, it } from 'vitest';
import {
  AUTH_KEYS_FILE_KEY,
  buildConfigMap,
  CONFIG_FILE_KEY,
  ConfigRenderError,
  OPERATOR_OWNED_CONFIG_KEYS,
  renderRuntimeConfig,
} from '../../../../operator/src/specs/config-map.ts';
import { CONFIG_HASH_ANNOTATION } from '../../../../operator/src/specs/meta.ts';
import {
  buildRuntimeDeployment,
  configHash,
  type ConfigHashInputs,
  operatorEnv,
} from '../../../../operator/src/specs/runtime-deployment.ts';
import { loadConfig, SETTINGS } from '../../../../runtime/src/config/config.ts';
import { cluster } from './fixtures.ts';

function deployment(spec: Parameters<typeof cluster>[0] = {}, hash = 'h1') {
  return buildRuntimeDeployment(cluster(spec), { configHash: hash });
}

function runtimeContainer(spec: Parameters<typeof cluster>[0] = {}) {
  return deployment(spec).spec.template.spec.containers[0]!;
}

describe('config hash', () => {
  const base: ConfigHashInputs = {
    configMap: { 'ratchet.toml': 'a = 1\n', 'auth-keys.pem': 'PEM' },
    secrets: { 'pg-dsn/uri': 'cG9zdGdyZXM6Ly8=' },
  };

  it('does not depend on key order', () => {
    const entries = fc.array(fc.tuple(fc.string({ minLength: 1, maxLength: 8 }), fc.string({ maxLength: 16 })), {
      maxLength: 8,
    });
    fc.assert(
      fc.property(entries, entries, (a, b) => {
        const cm = Object.fromEntries(a);
        const sec = Object.fromEntries(b);
        const reversed = (o: Record<string, string>) => Object.fromEntries(Object.entries(o).reverse());
        expect(configHash({ configMap: cm, secrets: sec })).toBe(
          configHash({ configMap: reversed(cm), secrets: reversed(sec) }),
        );
      }),
    );
  });

  it('changes when any ConfigMap or Secret value changes, and only then', () => {
    const h = configHash(base);
    expect(configHash({ ...base })).toBe(h);
    expect(configHash({ ...base, configMap: { ...base.configMap, 'ratchet.toml': 'a = 2\n' } })).not.toBe(h);
    expect(configHash({ ...base, configMap: { ...base.configMap, 'auth-keys.pem': 'PEM2' } })).not.toBe(h);
    expect(configHash({ ...base, secrets: { 'pg-dsn/uri': 'b3RoZXI=' } })).not.toBe(h);
    expect(configHash({ ...base, secrets: { ...base.secrets, 'tls/tls.crt': 'Y2VydA==' } })).not.toBe(h);
    fc.assert(
      fc.property(fc.string(), fc.string(), (x, y) => {
        const hx = configHash({ ...base, secrets: { 'pg-dsn/uri': x } });
        const hy = configHash({ ...base, secrets: { 'pg-dsn/uri': y } });
        expect(hx === hy).toBe(x === y);
      }),
    );
  });

  it('lands on the pod template, so a new hash rolls the pods', () => {
    expect(deployment({}, 'one').spec.template.metadata.annotations[CONFIG_HASH_ANNOTATION]).toBe('one');
    expect(deployment({}, 'two').spec.template.metadata.annotations[CONFIG_HASH_ANNOTATION]).toBe('two');
  });
});

describe('runtime ConfigMap', () => {
  it('renders spec.config as TOML without the keys the operator owns', () => {
    const toml = renderRuntimeConfig({
      'cluster-name': 'other',
      'node-name': 'same-for-all',
      database: { url: 'postgres://x', 'pool-size': 3 },
      admin: { bind: '127.0.0.1:1' },
      auth: { 'keys-file': '/nope' },
      cluster: { 'advertised-address': '10.0.0.1', 'shutdown-delay': '1m', 'lease-timeout': '5s' },
      'database.url': 'flat form too',
      worker: { 'cleanup-interval': '1m' },
      invoker: { 'max-awaited-future-depth': 100, 'inactivity-timeout': '1m' },
      log: { level: 'debug' },
    });
    expect(parse(toml)).toEqual({
      cluster: { 'lease-timeout': '5s' },
      invoker: { 'inactivity-timeout': '1m', 'max-awaited-future-depth': 100 },
      log: { level: 'debug' },
      worker: { 'cleanup-interval': '1m' },
    });
    expect(parse(renderRuntimeConfig(undefined))).toEqual({});
    expect(renderRuntimeConfig({ log: { level: 'info' } })).toMatch(/^# Written by ratchet-operator/);
  });

  it('renders the same text whatever the key order, and round-trips through a TOML parser', () => {
    const key = fc.stringMatching(/^[a-z][a-z-]{0,8}$/);
    const value = fc.oneof(fc.string({ maxLength: 10 }), fc.integer(), fc.boolean());
    const table = fc.dictionary(key, fc.oneof(value, fc.dictionary(key, value, { maxKeys: 4 })), { maxKeys: 6 });
    fc.assert(
      fc.property(table, (config) => {
        const reversed = Object.fromEntries(Object.entries(config).reverse());
        const toml = renderRuntimeConfig(config);
        expect(renderRuntimeConfig(reversed)).toBe(toml);
        const parsed = parse(toml);
        for (const owned of OPERATOR_OWNED_CONFIG_KEYS) {
          const [section, name] = owned.split('.');
          const found = name === undefined ? parsed[section!] : (parsed[section!] as Record<string, unknown>)?.[name];
          expect(found).toBeUndefined();
        }
      }),
    );
  });

  it('says why spec.config cannot be TOML', () => {
    expect(() => renderRuntimeConfig({ list: [1, null] })).toThrow(ConfigRenderError);
    expect(() => renderRuntimeConfig({ list: [1, null] })).toThrow(/spec.config cannot be written as TOML/);
  });

  it('holds ratchet.toml and, in managed mode only, the public key', () => {
    const cm = buildConfigMap(cluster(), { toml: 'x = 1\n', publicKeyPem: 'PUBLIC' });
    expect(cm.metadata.name).toBe('demo-config');
    expect(cm.data).toEqual({ [CONFIG_FILE_KEY]: 'x = 1\n', [AUTH_KEYS_FILE_KEY]: 'PUBLIC' });
    expect(buildConfigMap(cluster({ auth: { enabled: false } }), { toml: '' }).data).toEqual({ [CONFIG_FILE_KEY]: '' });
    expect(() => buildConfigMap(cluster(), { toml: '' })).toThrow(/public key/);
  });
});

describe('the runtime reads what the pods get', () => {
  it('knows every variable the operator sets, and the operator keeps their file keys out of ratchet.toml', () => {
    const tls = { secretRef: { name: 's' }, ingress: { name: 'i' }, introspection: { name: 't' } };
    const names = [
      ...operatorEnv(cluster({ tls: { ...tls, clientAuth: { caSecretRef: { name: 'ca' } } } })),
      ...operatorEnv(cluster({ tls: { ...tls, clientAuth: { caSecretRef: { name: 'ca' }, listeners: ['admin'] } } })),
    ]
      .map((e) => e.name)
      .filter((name) => name !== 'RATCHET_CONFIG');
    const settings: Readonly<Record<string, string>> = SETTINGS;
    expect(names.filter((name) => settings[name] === undefined)).toEqual([]);
    expect(names.map((name) => settings[name]).filter((key) => !OPERATOR_OWNED_CONFIG_KEYS.has(key!))).toEqual([]);
  });

  it('gives every listener the TLS files spec.tls names, as the runtime resolves them', () => {
    const env: Record<string, string> = { RATCHET_DATABASE_URL: 'postgres://ratchet:pw@db:5432/ratchet' };
    const spec = {
      tls: {
        secretRef: { name: 'shared' },
        observability: { name: 'obs' },
        clientAuth: { caSecretRef: { name: 'ca' }, listeners: ['ingress' as const, 'observability' as const] },
      },
    };
    for (const e of runtimeContainer(spec).env ?? []) if (e.value !== undefined) env[e.name] = e.value;
    delete env['RATCHET_CONFIG'];
    const config = loadConfig({ env, cwd: '/' });
    const shared = { certFile: '/etc/ratchet/tls/shared/tls.crt', keyFile: '/etc/ratchet/tls/shared/tls.key' };
    const ca = '/etc/ratchet/tls/client-ca/ca.crt';
    expect(config.ingress.tls).toEqual({ ...shared, clientCaFile: ca });
    expect(config.admin.tls).toEqual({ ...shared, clientCaFile: undefined });
    expect(config.observability.tls).toEqual({
      certFile: '/etc/ratchet/tls/observability/tls.crt',
      keyFile: '/etc/ratchet/tls/observability/tls.key',
      clientCaFile: ca,
    });
    // The SQL listener falls back to the shared pair.
    expect(config.introspection.tls).toEqual(shared);
  });

  it("loads the operator's environment and rendered file without complaint", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'ratchet-cfg-'));
    try {
      const file = join(dir, 'ratchet.toml');
      await writeFile(
        file,
        renderRuntimeConfig({
          'cluster-name': 'ignored',
          cluster: { 'advertised-address': 'one-for-all', 'shutdown-delay': '10m', 'lease-timeout': '4s' },
          log: { level: 'debug' },
          invoker: { 'inactivity-timeout': '2m' },
        }),
      );
      // What the kubelet resolves: the DSN from its Secret, the pod's own name and IP from the downward API.
      const resolved: Record<string, string> = {
        'metadata.name': 'demo-7c9d8f6b5-x2k4q',
        'status.podIP': '10.244.1.7',
      };
      const env: Record<string, string> = {};
      for (const e of runtimeContainer({ tls: { introspection: { name: 't' } } }).env ?? []) {
        const field = e.valueFrom?.fieldRef?.fieldPath;
        env[e.name] = e.value ?? (field === undefined ? 'postgres://ratchet:pw@db:5432/ratchet' : resolved[field]!);
      }
      env['RATCHET_CONFIG'] = file;
      const config = loadConfig({ env, cwd: dir });
      expect(config.clusterName).toBe('demo');
      expect(config.nodeName).toBe('demo-7c9d8f6b5-x2k4q');
      expect(config.cluster.advertisedAddress).toBe('10.244.1.7');
      expect(config.cluster.shutdownDelayMs).toBe(5_000);
      expect(config.cluster.leaseTimeoutMs).toBe(4_000);
      expect(config.ingress.bind).toMatchObject({ host: '0.0.0.0', port: 8080 });
      expect(config.metrics.bind).toMatchObject({ host: '0.0.0.0', port: 5122 });
      expect(config.auth.keysFile).toBe('/etc/ratchet/config/auth-keys.pem');
      expect(config.dataDir).toBe('/var/lib/ratchet');
      // An unknown RATCHET_* variable is only a warning to the runtime: this is where a renamed setting shows.
      expect(config.warnings).toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
