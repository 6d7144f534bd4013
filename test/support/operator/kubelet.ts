import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  AppsV1Api,
  CoreV1Api,
  KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  type V1Container,
  type V1Deployment,
  type V1EnvVar,
  type V1Service,
} from '@kubernetes/client-node';
import {
  answers200,
  captureOutput,
  exitStatus,
  hasExited,
  terminate,
  trackChild,
  type ExitStatus,
} from '../child-process.ts';
import { freePort, loopbackUrl } from '../ports.ts';
import { REPO_ROOT } from '../runtime-process.ts';

/*
 * A process-backed stand-in for the kubelet and the Deployment controller (operator.md §3.4 D): for every apps/v1
 * Deployment of Ratchet runtime pods it finds through the (fake) API server, it starts real Ratchet runtime processes
 * on loopback — env resolved from the pod template (values, Secret and ConfigMap refs, downward API), ConfigMap and
 * Secret volumes written to temporary directories, every 0.0.0.0:<port> bind moved to a free loopback port — and
 * writes the Deployment status (replicas, updated, ready from each process's /ready) back through /status. A template
 * change rolls the processes. `serviceUrl` maps a Service port to the loopback port of a ready pod it selects, so the
 * operator reaches the runtimes it provisioned. The runtime image is ignored: every pod runs this checkout.
 */

interface Pod {
  readonly name: string;
  readonly templateHash: string;
  readonly labels: Record<string, string>;
  /** Container port → loopback port. */
  readonly ports: Map<number, number>;
  readonly child: ChildProcess;
  readonly exited: Promise<ExitStatus>;
  readonly output: () => string;
  readonly dir: string;
  ready: boolean;
}

export interface Kubelet {
  /** For the operator's ReconcileContext: Service port → a ready pod's loopback URL (a closed port when none). */
  serviceUrl(namespace: string, service: string, port: number, scheme?: 'http' | 'https'): string;
  /** Loopback port of `containerPort` on a ready pod behind the Service `service`, if any. */
  servicePort(namespace: string, service: string, port: number): number | undefined;
  /** Runtime processes now running, for assertions and debugging. */
  pods(): { name: string; namespace: string; deployment: string; pid: number; ready: boolean; output: string }[];
  stop(): Promise<void>;
}

export interface KubeletOptions {
  readonly kubeconfigPath: string;
  /** How often to look at Deployments and probe pods. */
  readonly intervalMs?: number;
  /** Label selector of the Deployments to run (default: Ratchet runtime pods made by the operator). */
  readonly selector?: string;
  /** Only run pods in these namespaces (default: all). */
  readonly namespaces?: readonly string[];
}

const CLOSED_PORT_URL = 'http://127.0.0.1:9';

function hash(value: unknown): string {
  return createHash('sha256').update(JSON.stringify(value)).digest('hex').slice(0, 10);
}

function decode(data: Record<string, string> | undefined, key: string): string | undefined {
  const v = data?.[key];
  return v === undefined ? undefined : Buffer.from(v, 'base64').toString('utf8');
}

export async function startKubelet(options: KubeletOptions): Promise<Kubelet> {
  const kc = new KubeConfig();
  kc.loadFromFile(options.kubeconfigPath);
  const apps = kc.makeApiClient(AppsV1Api);
  const core = kc.makeApiClient(CoreV1Api);
  const selector =
    options.selector ?? 'app.kubernetes.io/managed-by=ratchet-operator,app.kubernetes.io/component=runtime';
  const pods = new Map<string, Pod[]>(); // by namespace/deployment
  let services: V1Service[] = [];
  let stopped = false;
  let podCounter = 0;

  async function resolveEnv(
    namespace: string,
    podName: string,
    container: V1Container,
    mounts: Map<string, string>,
  ): Promise<Record<string, string>> {
    const env: Record<string, string> = {};
    for (const e of container.env ?? []) env[e.name] = await envValue(namespace, podName, e);
    // Paths under a mounted volume point into the pod's temporary directory instead.
    for (const [name, value] of Object.entries(env)) {
      for (const [mountPath, dir] of mounts) {
        if (value === mountPath || value.startsWith(`${mountPath}/`)) env[name] = dir + value.slice(mountPath.length);
      }
    }
    return env;
  }

  async function envValue(namespace: string, podName: string, e: V1EnvVar): Promise<string> {
    if (e.value !== undefined) return e.value;
    const from = e.valueFrom;
    if (from?.secretKeyRef !== undefined) {
      const s = await core.readNamespacedSecret({ namespace, name: from.secretKeyRef.name! });
      const v = decode(s.data, from.secretKeyRef.key);
      if (v === undefined) throw new Error(`secret ${from.secretKeyRef.name} has no key ${from.secretKeyRef.key}`);
      return v;
    }
    if (from?.configMapKeyRef !== undefined) {
      const c = await core.readNamespacedConfigMap({ namespace, name: from.configMapKeyRef.name! });
      return c.data?.[from.configMapKeyRef.key] ?? '';
    }
    if (from?.fieldRef !== undefined) {
      if (from.fieldRef.fieldPath === 'metadata.name') return podName;
      if (from.fieldRef.fieldPath === 'metadata.namespace') return namespace;
      // Every pod runs on loopback, each listener on its own port.
      if (from.fieldRef.fieldPath === 'status.podIP') return '127.0.0.1';
    }
    return '';
  }

  /** Writes the pod's ConfigMap/Secret volumes; returns mountPath → local directory. */
  async function materializeVolumes(
    d: V1Deployment,
    dir: string,
    container: V1Container,
  ): Promise<Map<string, string>> {
    const namespace = d.metadata!.namespace!;
    const mounts = new Map<string, string>();
    for (const m of container.volumeMounts ?? []) {
      const volume = d.spec!.template.spec!.volumes?.find((v) => v.name === m.name);
      const local = join(dir, 'volumes', m.name);
      mkdirSync(local, { recursive: true });
      let files: Record<string, string> = {};
      if (volume?.configMap !== undefined) {
        files = (await core.readNamespacedConfigMap({ namespace, name: volume.configMap.name! })).data ?? {};
      } else if (volume?.secret !== undefined) {
        const data = (await core.readNamespacedSecret({ namespace, name: volume.secret.secretName! })).data ?? {};
        files = Object.fromEntries(Object.keys(data).map((k) => [k, decode(data, k)!]));
      }
      for (const [k, v] of Object.entries(files)) writeFileSync(join(local, k), v);
      const path = m.subPath === undefined ? local : join(local, m.subPath);
      mounts.set(m.mountPath, path);
    }
    return mounts;
  }

  async function startPod(d: V1Deployment, templateHash: string): Promise<Pod> {
    const namespace = d.metadata!.namespace!;
    const name = `${d.metadata!.name!}-${templateHash.slice(0, 5)}-${++podCounter}`;
    const container = d.spec!.template.spec!.containers[0]!;
    const dir = mkdtempSync(join(tmpdir(), `kubelet-${name}-`));
    const mounts = await materializeVolumes(d, dir, container);
    const env = await resolveEnv(namespace, name, container, mounts);
    const ports = new Map<number, number>();
    for (const [key, value] of Object.entries(env)) {
      const m = /^0\.0\.0\.0:(\d+)$/.exec(value);
      if (key.endsWith('_BIND') && m !== null) {
        const local = await freePort();
        ports.set(Number(m[1]), local);
        env[key] = `127.0.0.1:${local}`;
      }
    }
    const child = spawn(process.execPath, ['--import', 'tsx', 'runtime/src/main.ts'], {
      cwd: REPO_ROOT,
      env: { ...process.env, RATCHET_LOG_LEVEL: 'warn', ...env, RATCHET_NODE_NAME: name },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    trackChild(child);
    return {
      name,
      templateHash,
      labels: { ...(d.spec!.template.metadata?.labels ?? {}) },
      ports,
      child,
      exited: exitStatus(child),
      output: captureOutput(child),
      dir,
      ready: false,
    };
  }

  async function stopPod(pod: Pod): Promise<void> {
    await terminate(pod.child, pod.exited, 10_000);
    rmSync(pod.dir, { recursive: true, force: true });
  }

  async function probe(pod: Pod, container: V1Container): Promise<void> {
    const readiness = container.readinessProbe?.httpGet;
    const port = typeof readiness?.port === 'number' ? readiness.port : 5122;
    const local = pod.ports.get(port);
    pod.ready =
      !hasExited(pod.child) &&
      local !== undefined &&
      (await answers200(`${loopbackUrl(local)}${readiness?.path ?? '/ready'}`));
  }

  async function syncDeployment(d: V1Deployment): Promise<void> {
    const key = `${d.metadata!.namespace!}/${d.metadata!.name!}`;
    const templateHash = hash(d.spec!.template);
    const desired = d.spec!.replicas ?? 1;
    let current = pods.get(key) ?? [];
    // Crashed pods are replaced, as a kubelet restarts containers.
    for (const p of current.filter((p) => hasExited(p.child))) await stopPod(p);
    current = current.filter((p) => !hasExited(p.child));
    const updated = current.filter((p) => p.templateHash === templateHash);
    while (updated.length < desired) {
      const p = await startPod(d, templateHash);
      updated.push(p);
      current.push(p);
    }
    for (const p of updated.slice(desired)) {
      await stopPod(p);
      current = current.filter((c) => c !== p);
    }
    const container = d.spec!.template.spec!.containers[0]!;
    for (const p of current) await probe(p, container);
    // Old pods go once every updated pod is ready (maxUnavailable 0).
    const updatedNow = current.filter((p) => p.templateHash === templateHash);
    if (updatedNow.every((p) => p.ready)) {
      for (const p of current.filter((c) => c.templateHash !== templateHash)) await stopPod(p);
      current = updatedNow;
    }
    pods.set(key, current);
    const ready = current.filter((p) => p.ready).length;
    const status = {
      observedGeneration: d.metadata!.generation ?? 1,
      replicas: current.length,
      updatedReplicas: updatedNow.length,
      readyReplicas: ready,
      availableReplicas: ready,
      ...(ready < desired ? { unavailableReplicas: desired - ready } : {}),
      conditions: [
        {
          type: 'Available',
          status: ready >= desired ? 'True' : 'False',
          reason: ready >= desired ? 'MinimumReplicasAvailable' : 'MinimumReplicasUnavailable',
          message: `${ready}/${desired} ready`,
        },
      ],
    };
    const previous = d.status ?? {};
    const same =
      previous.observedGeneration === status.observedGeneration &&
      (previous.replicas ?? 0) === status.replicas &&
      (previous.updatedReplicas ?? 0) === status.updatedReplicas &&
      (previous.readyReplicas ?? 0) === status.readyReplicas;
    if (!same) {
      await apps.patchNamespacedDeploymentStatus(
        { namespace: d.metadata!.namespace!, name: d.metadata!.name!, body: { status } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
    }
  }

  async function tick(): Promise<void> {
    const list = await apps.listDeploymentForAllNamespaces({ labelSelector: selector });
    const seen = new Set<string>();
    for (const d of list.items) {
      if (options.namespaces !== undefined && !options.namespaces.includes(d.metadata!.namespace!)) continue;
      seen.add(`${d.metadata!.namespace!}/${d.metadata!.name!}`);
      await syncDeployment(d).catch(() => undefined); // a Secret not there yet: try again next tick
    }
    for (const [key, ps] of [...pods]) {
      if (seen.has(key)) continue;
      pods.delete(key);
      for (const p of ps) await stopPod(p);
    }
    services = (await core.listServiceForAllNamespaces()).items;
  }

  let loop: Promise<void> = Promise.resolve();
  const run = async (): Promise<void> => {
    while (!stopped) {
      await tick().catch(() => undefined); // the API server may be injecting faults; the next tick retries
      await new Promise((r) => setTimeout(r, options.intervalMs ?? 250));
    }
  };
  loop = run();

  function servicePort(namespace: string, service: string, port: number): number | undefined {
    const svc = services.find((s) => s.metadata?.namespace === namespace && s.metadata.name === service);
    if (svc === undefined) return undefined;
    const sp = svc.spec?.ports?.find((p) => p.port === port);
    const target = typeof sp?.targetPort === 'number' ? sp.targetPort : port;
    const sel = svc.spec?.selector ?? {};
    for (const [key, ps] of pods) {
      if (!key.startsWith(`${namespace}/`)) continue;
      for (const p of ps) {
        if (!p.ready) continue;
        if (!Object.entries(sel).every(([k, v]) => p.labels[k] === v)) continue;
        const local = p.ports.get(target);
        if (local !== undefined) return local;
      }
    }
    return undefined;
  }

  return {
    servicePort,
    serviceUrl(namespace, service, port, scheme = 'http') {
      const local = servicePort(namespace, service, port);
      return local === undefined ? CLOSED_PORT_URL : `${scheme}://127.0.0.1:${local}`;
    },
    pods() {
      return [...pods].flatMap(([key, ps]) =>
        ps.map((p) => ({
          name: p.name,
          namespace: key.split('/')[0]!,
          deployment: key.split('/')[1]!,
          pid: p.child.pid ?? -1,
          ready: p.ready,
          output: p.output(),
        })),
      );
    },
    async stop() {
      stopped = true;
      await loop;
      for (const ps of pods.values()) for (const p of ps) await stopPod(p);
      pods.clear();
    },
  };
}
