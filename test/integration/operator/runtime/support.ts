import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { KubeConfig } from '@kubernetes/client-node';
import { ClientNodeKube } from '../../../../operator/src/kube/client-node.ts';
import type { KubeObject } from '../../../../operator/src/kube/types.ts';
import { createLogger, type Logger } from '../../../../operator/src/telemetry/logger.ts';
import { startFakeKube, type FakeKube } from '../../../support/fake-kube/index.ts';

/** A test-only kind: the runtime pieces are exercised on it so they do not depend on the real controllers. */
export const WIDGET_API = 'test.ratchet.dev/v1';

export const WIDGET_CRD = {
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: 'widgets.test.ratchet.dev' },
  spec: {
    group: 'test.ratchet.dev',
    scope: 'Namespaced',
    names: { kind: 'Widget', plural: 'widgets', singular: 'widget', listKind: 'WidgetList' },
    versions: [
      {
        name: 'v1',
        served: true,
        storage: true,
        subresources: { status: {} },
        schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
      },
    ],
  },
};

export interface Widget extends KubeObject {
  spec?: { size?: number };
  status?: { observedGeneration?: number; seen?: string };
}

export function widget(namespace: string, name: string, size = 1, labels?: Record<string, string>): Widget {
  return {
    apiVersion: WIDGET_API,
    kind: 'Widget',
    metadata: { namespace, name, ...(labels === undefined ? {} : { labels }) },
    spec: { size },
  };
}

export interface TestCluster {
  readonly fake: FakeKube;
  readonly kubeConfig: KubeConfig;
  /** A fresh client on the same kubeconfig (one per simulated operator replica). */
  client(): ClientNodeKube;
  close(): Promise<void>;
}

/** The fake API server with the Widget CRD and namespaces `a` to `d` and `ops`, and a client-node kubeconfig for it. */
export async function startTestCluster(): Promise<TestCluster> {
  const fake = await startFakeKube({ namespaces: ['a', 'b', 'c', 'd', 'ops'], bookmarkIntervalMs: 200 });
  fake.put(WIDGET_CRD);
  const dir = mkdtempSync(join(tmpdir(), 'ratchet-operator-runtime-'));
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(fake.writeKubeconfig(dir));
  const clients: ClientNodeKube[] = [];
  return {
    fake,
    kubeConfig,
    client: () => {
      const c = new ClientNodeKube(kubeConfig, { requestTimeoutMs: 5_000 });
      clients.push(c);
      return c;
    },
    close: async () => {
      for (const c of clients) c.close();
      await fake.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A logger whose JSON lines the test can read. */
export function capturedLogger(): { log: Logger; lines: () => Record<string, unknown>[] } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      chunks.push(chunk.toString('utf8'));
      callback();
    },
  });
  return {
    log: createLogger('debug', { destination: stream }),
    lines: () =>
      chunks
        .join('')
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}
