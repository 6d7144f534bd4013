import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiException, KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { expect } from 'vitest';
import { terminate, trackChild, exitStatus } from '../../support/child-process.ts';
import { startFakeKube, type FakeKube, type FakeKubeOptions } from '../../support/fake-kube/index.ts';

/** Shared setup for the fake-kube suites: a fake, a temp dir, kubeconfigs, a kubectl runner, a test CRD. */

export const GROUP = 'example.com';

/** A client-node object with its other top-level fields (spec, status, data…) reachable by index. */
export type Obj = KubernetesObject & Record<string, unknown>;

/** A small namespaced CRD with status and scale subresources, list-map and set markers, and printer columns. */
export const WIDGET_CRD: Obj = {
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: `widgets.${GROUP}` },
  spec: {
    group: GROUP,
    scope: 'Namespaced',
    names: {
      plural: 'widgets',
      singular: 'widget',
      kind: 'Widget',
      listKind: 'WidgetList',
      shortNames: ['wd'],
      categories: ['gadgets'],
    },
    versions: [
      {
        name: 'v1',
        served: true,
        storage: true,
        subresources: {
          status: {},
          scale: {
            specReplicasPath: '.spec.size',
            statusReplicasPath: '.status.replicas',
            labelSelectorPath: '.status.selector',
          },
        },
        additionalPrinterColumns: [
          { name: 'Ready', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].status' },
          { name: 'Size', type: 'integer', jsonPath: '.spec.size' },
          { name: 'Image', type: 'string', jsonPath: '.spec.image', priority: 1 },
          { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
        ],
        schema: {
          openAPIV3Schema: {
            type: 'object',
            description: 'A Widget for tests.',
            properties: {
              spec: {
                type: 'object',
                description: 'What the widget should be.',
                properties: {
                  size: { type: 'integer', description: 'How many.' },
                  image: { type: 'string' },
                  ports: {
                    type: 'array',
                    'x-kubernetes-list-type': 'map',
                    'x-kubernetes-list-map-keys': ['name'],
                    items: {
                      type: 'object',
                      required: ['name'],
                      properties: { name: { type: 'string' }, port: { type: 'integer' } },
                    },
                  },
                  tags: { type: 'array', 'x-kubernetes-list-type': 'set', items: { type: 'string' } },
                  args: { type: 'array', items: { type: 'string' } },
                },
              },
              status: {
                type: 'object',
                properties: {
                  observedGeneration: { type: 'integer' },
                  replicas: { type: 'integer' },
                  selector: { type: 'string' },
                  conditions: {
                    type: 'array',
                    'x-kubernetes-list-type': 'map',
                    'x-kubernetes-list-map-keys': ['type'],
                    items: {
                      type: 'object',
                      required: ['type', 'status'],
                      properties: { type: { type: 'string' }, status: { type: 'string' }, reason: { type: 'string' } },
                    },
                  },
                },
              },
            },
          },
        },
      },
      {
        name: 'v1beta1',
        served: true,
        storage: false,
        subresources: { status: {} },
        schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
      },
    ],
  },
};

export function widget(name: string, namespace: string, spec: Record<string, unknown>): Obj {
  return { apiVersion: `${GROUP}/v1`, kind: 'Widget', metadata: { name, namespace }, spec };
}

export interface Harness {
  readonly fake: FakeKube;
  readonly dir: string;
  /** Admin kubeconfig path. */
  readonly kubeconfig: string;
  readonly kc: KubeConfig;
  readonly stop: () => Promise<void>;
}

export async function startHarness(options: FakeKubeOptions = {}): Promise<Harness> {
  const fake = await startFakeKube(options);
  const dir = mkdtempSync(join(tmpdir(), 'fake-kube-'));
  const kubeconfig = fake.writeKubeconfig(dir);
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  return {
    fake,
    dir,
    kubeconfig,
    kc,
    stop: async () => {
      await fake.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export function kubeConfigFor(fake: FakeKube, dir: string, user: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(fake.writeKubeconfig(dir, { user }));
  return kc;
}

export interface KubectlResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs the real kubectl against the fake (its own cache dir per harness), stopping it by PID after `timeoutMs`. */
export async function kubectl(h: Harness, args: readonly string[], timeoutMs = 30_000): Promise<KubectlResult> {
  const child = spawn('kubectl', ['--kubeconfig', h.kubeconfig, '--cache-dir', join(h.dir, 'kube-cache'), ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  trackChild(child);
  const exited = exitStatus(child);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const timer = setTimeout(() => void terminate(child, exited, 2000), timeoutMs);
  const { code } = await exited;
  clearTimeout(timer);
  return { code, stdout, stderr };
}

/** Asserts that `promise` fails with an ApiException carrying a Status of this code and reason; returns the Status. */
export async function expectStatus(
  promise: Promise<unknown>,
  code: number,
  reason: string,
): Promise<{ message: string; reason: string; code: number; details?: Record<string, unknown> }> {
  const error: unknown = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ApiException);
  const exception = error as ApiException<unknown>;
  expect(exception.code).toBe(code);
  const raw = exception.body;
  const status = (typeof raw === 'string' ? JSON.parse(raw) : raw) as {
    kind: string;
    message: string;
    reason: string;
    code: number;
    details?: Record<string, unknown>;
  };
  expect(status).toMatchObject({ kind: 'Status', status: 'Failure', reason, code });
  return status;
}
