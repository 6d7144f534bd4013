import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createWriteStream, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer, type AddressInfo, type Server } from 'node:net';
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
  type V1DeploymentCondition,
  type V1Probe,
  type V1Service,
} from '@kubernetes/client-node';
import { captureOutput, exitStatus, hasExited, terminate, trackChild, type ExitStatus } from '../child-process.ts';
import { freePort, LOOPBACK, loopbackUrl } from '../ports.ts';
import { REPO_ROOT } from '../runtime-process.ts';
import { check, materializeVolumes, resolveEnv } from './pod-template.ts';
import { planRollout, resolveFenceposts, type PodView } from './rolling-update.ts';

/*
 * A process-backed stand-in for the kubelet, the Deployment controller and the endpoints controller (operator.md
 * §3.4 D): for every apps/v1 Deployment of Ratchet runtime pods it finds through the (fake) API server, it runs real
 * Ratchet runtime processes on loopback — env resolved from the pod template (values, Secret and ConfigMap refs,
 * downward API), ConfigMap and Secret volumes written to temporary directories, every 0.0.0.0:<port> bind moved to a
 * free loopback port — and writes the Deployment status back through /status.
 *
 * What it does as Kubernetes does:
 * - rollouts follow the Deployment's strategy (rolling-update.ts): with maxSurge 1 and maxUnavailable 0 one new pod
 *   starts, and only once it is ready (for minReadySeconds) does one old pod get deleted; a deleted pod no longer
 *   counts, so the next new pod starts while the old one is still shutting down;
 * - deleting a pod sends SIGTERM and, after the pod's terminationGracePeriodSeconds, SIGKILL; the pod leaves the
 *   Service endpoints at once;
 * - the startup, readiness and liveness probes of the pod spec (httpGet and tcpSocket) run on their own periods with
 *   their thresholds; readiness and liveness wait for the startup probe; a pod is ready once its readiness probe has
 *   passed successThreshold times and stays ready until it failed failureThreshold times in a row;
 * - a container that exits while its pod is not being deleted is restarted in the same pod (same name, same ports),
 *   the first time at once, then after 10 s, 20 s, … (CrashLoopBackOff); a failing liveness probe restarts it too;
 * - `endpoints` is what a Service routes to: the ready, non-terminating pods its selector matches, at the target
 *   port (numbered or named); `proxy` is a kube-proxy in front of them, choosing a pod per connection and leaving
 *   established connections with their pod while it terminates.
 * What it does not do: Pod and ReplicaSet objects in the API server, ConfigMap/Secret volume updates in a running pod,
 * exec and gRPC probes (a pod with one never becomes ready), proportional scaling (replicas changed in the middle of a
 * rollout), the delay before every node's kube-proxy stops sending new connections to a deleted pod. The runtime
 * image is ignored: every pod runs this checkout, with the test process's environment minus its RATCHET_* variables.
 */

interface Container {
  readonly child: ChildProcess;
  readonly exited: Promise<ExitStatus>;
  readonly output: () => string;
}

interface Pod extends PodView {
  readonly name: string;
  readonly namespace: string;
  readonly deployment: string;
  readonly templateHash: string;
  readonly labels: Record<string, string>;
  readonly spec: V1Container;
  /** Container port → loopback port. */
  readonly ports: Map<number, number>;
  /** Port name → container port. */
  readonly namedPorts: Map<string, number>;
  readonly env: Record<string, string>;
  readonly dir: string;
  readonly graceMs: number;
  readonly minReadyMs: number;
  readonly createdAt: number;
  container: Container;
  /** Output of earlier runs of the container. */
  history: string;
  restarts: number;
  started: boolean;
  ready: boolean;
  readySince: number | undefined;
  terminating: boolean;
  /** Settles when the pod is gone (its process exited after deletion). */
  gone: Promise<void> | undefined;
  /** A restart is scheduled (CrashLoopBackOff). */
  restartTimer: NodeJS.Timeout | undefined;
  readonly available: boolean;
}

export interface PodInfo {
  name: string;
  namespace: string;
  deployment: string;
  templateHash: string;
  pid: number;
  ready: boolean;
  terminating: boolean;
  restarts: number;
  output: string;
}

/** Something that happened to a pod, as `kubectl get events` would list it (`at` in ms since the epoch). */
export interface PodEvent {
  at: number;
  namespace: string;
  pod: string;
  reason: 'Created' | 'Started' | 'Ready' | 'NotReady' | 'Killing' | 'Exited' | 'Restarted';
  message: string;
}

export interface Kubelet {
  /** For the operator's ReconcileContext: Service port → one of its endpoints, in turn (a closed port when none). */
  serviceUrl(namespace: string, service: string, port: number, scheme?: 'http' | 'https'): string;
  /** What the Service routes to now: ready, non-terminating pods it selects, as `http://127.0.0.1:<port>` URLs. */
  endpoints(namespace: string, service: string, port: number): string[];
  /**
   * A kube-proxy for one Service port: a loopback URL whose every new TCP connection goes to one of the Service's
   * endpoints at that moment, chosen at random; a connection stays with its pod until either side closes it, as with
   * conntrack, even once the pod is terminating. With no endpoint, connections are refused (reset).
   */
  proxy(namespace: string, service: string, port: number): Promise<string>;
  /** Runtime pods (terminating ones included) for assertions and debugging. */
  pods(): PodInfo[];
  /** Every pod event so far, oldest first, those of pods that are gone included. */
  events(): PodEvent[];
  /** Deletes every pod (SIGTERM, SIGKILL after each pod's grace period) and waits until they are gone. */
  stop(): Promise<void>;
}

export interface KubeletOptions {
  readonly kubeconfigPath: string;
  /** How often the Deployment controller looks at Deployments and pods. */
  readonly intervalMs?: number;
  /** Label selector of the Deployments to run (default: Ratchet runtime pods made by the operator). */
  readonly selector?: string;
  /** Only run pods in these namespaces (default: all). */
  readonly namespaces?: readonly string[];
  /** Environment every pod starts with, below the pod template's (default: RATCHET_LOG_LEVEL=warn). */
  readonly env?: Readonly<Record<string, string>>;
  /** Also write every pod's output to `<logDir>/<pod>.log` (kept after the pod is gone). */
  readonly logDir?: string;
}

const CLOSED_PORT_URL = 'http://127.0.0.1:9';
const BACKOFF_START_MS = 10_000;
const BACKOFF_MAX_MS = 300_000;

function hash(value: unknown): string {
  return createHash('sha256').update(JSON.stringify(value)).digest('hex').slice(0, 10);
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

export async function startKubelet(options: KubeletOptions): Promise<Kubelet> {
  const kc = new KubeConfig();
  kc.loadFromFile(options.kubeconfigPath);
  const apps = kc.makeApiClient(AppsV1Api);
  const core = kc.makeApiClient(CoreV1Api);
  const selector =
    options.selector ?? 'app.kubernetes.io/managed-by=ratchet-operator,app.kubernetes.io/component=runtime';
  const baseEnv = options.env ?? { RATCHET_LOG_LEVEL: 'warn' };
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('RATCHET_')));
  // By namespace/deployment, terminating pods included until they are gone. Lists are only ever changed in place:
  // a sync creating pods and a deletion finishing may interleave.
  const pods = new Map<string, Pod[]>();
  const podsOf = (key: string): Pod[] => {
    let list = pods.get(key);
    if (list === undefined) pods.set(key, (list = []));
    return list;
  };
  let services: V1Service[] = [];
  let stopped = false;
  let podCounter = 0;
  let turn = 0;
  const events: PodEvent[] = [];
  const proxies: Server[] = [];
  const record = (pod: Pod, reason: PodEvent['reason'], message = ''): void => {
    events.push({ at: Date.now(), namespace: pod.namespace, pod: pod.name, reason, message });
  };

  function spawnContainer(name: string, env: Record<string, string>): Container {
    const child = spawn(process.execPath, ['--import', 'tsx', 'runtime/src/main.ts'], {
      cwd: REPO_ROOT,
      // The test's own RATCHET_* settings are no pod's business. A pod's hostname is its name, which the runtime takes
      // as its node name when the template sets none.
      env: { ...inherited, ...baseEnv, RATCHET_NODE_NAME: name, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    trackChild(child);
    if (options.logDir !== undefined) {
      mkdirSync(options.logDir, { recursive: true });
      const file = createWriteStream(join(options.logDir, `${name}.log`), { flags: 'a' });
      child.stdout?.pipe(file, { end: false });
      child.stderr?.pipe(file, { end: false });
      child.once('close', () => file.end());
    }
    return { child, exited: exitStatus(child), output: captureOutput(child) };
  }

  /** The kubelet's view of a container it started: probes, and a restart when it exits. */
  function watchContainer(pod: Pod): void {
    const container = pod.container;
    void container.exited.then((status) => onContainerExit(pod, container, status));
    startProbers(pod, container);
  }

  function onContainerExit(pod: Pod, container: Container, status: ExitStatus): void {
    if (pod.container !== container) return;
    pod.started = false;
    setReady(pod, false);
    if (pod.terminating || stopped) return;
    // restartPolicy Always: the same pod runs the container again, after the crash-loop back-off.
    const delay = pod.restarts === 0 ? 0 : Math.min(BACKOFF_START_MS * 2 ** (pod.restarts - 1), BACKOFF_MAX_MS);
    pod.history += `${container.output()}\n[kubelet] container exited (code ${String(status.code)}, signal ${String(
      status.signal,
    )}); restarting in ${delay} ms\n`;
    pod.restartTimer = setTimeout(() => {
      pod.restartTimer = undefined;
      if (pod.terminating || stopped) return;
      pod.restarts += 1;
      record(pod, 'Restarted', `restart ${pod.restarts}`);
      pod.container = spawnContainer(pod.name, pod.env);
      watchContainer(pod);
    }, delay);
  }

  function setReady(pod: Pod, ready: boolean): void {
    if (ready !== pod.ready) record(pod, ready ? 'Ready' : 'NotReady');
    if (ready && !pod.ready) pod.readySince = Date.now();
    if (!ready) pod.readySince = undefined;
    pod.ready = ready;
  }

  /**
   * One worker per probe, as the kubelet runs them: first check at initialDelaySeconds after the container started,
   * then every periodSeconds; the result flips after successThreshold / failureThreshold checks in a row.
   */
  function startProbers(pod: Pod, container: Container): void {
    const current = (): boolean => pod.container === container && !pod.terminating && !hasExited(container.child);
    const worker = async (
      probe: V1Probe,
      kind: 'startup' | 'readiness' | 'liveness',
      onResult: (passed: boolean) => boolean,
    ): Promise<void> => {
      let successes = 0;
      let failures = 0;
      const periodMs = (probe.periodSeconds ?? 10) * 1000;
      let next = Date.now() + (probe.initialDelaySeconds ?? 0) * 1000;
      for (;;) {
        await sleep(next - Date.now());
        next += periodMs;
        if (!current()) return;
        if (kind === 'startup' || pod.started) {
          const passed = await check(probe, pod);
          if (!current()) return;
          successes = passed ? successes + 1 : 0;
          failures = passed ? 0 : failures + 1;
          const threshold = kind === 'readiness' ? (probe.successThreshold ?? 1) : 1;
          if (successes >= threshold && !onResult(true)) return;
          if (failures >= (probe.failureThreshold ?? 3) && !onResult(false)) return;
        }
      }
    };
    const { startupProbe, readinessProbe, livenessProbe } = pod.spec;
    pod.started = startupProbe === undefined;
    if (startupProbe !== undefined) {
      void worker(startupProbe, 'startup', (passed) => {
        if (passed) {
          pod.started = true;
          record(pod, 'Started', 'startup probe passed');
        } else killContainer(pod, container, 'startup probe failed');
        return false; // the startup probe stops once it has decided
      });
    }
    if (readinessProbe !== undefined) {
      void worker(readinessProbe, 'readiness', (passed) => {
        setReady(pod, passed);
        return true;
      });
    } else {
      // No readiness probe: ready as soon as the container has started.
      void (async () => {
        while (current() && !pod.started) await sleep(100);
        if (current()) setReady(pod, true);
      })();
    }
    if (livenessProbe !== undefined) {
      void worker(livenessProbe, 'liveness', (passed) => {
        if (!passed) killContainer(pod, container, 'liveness probe failed');
        return passed;
      });
    }
  }

  /** A failed liveness or startup probe: the kubelet kills the container (grace period), then restarts it. */
  function killContainer(pod: Pod, container: Container, reason: string): void {
    pod.history += `[kubelet] ${reason}; killing the container\n`;
    void terminate(container.child, container.exited, pod.graceMs);
  }

  async function createPod(d: V1Deployment, templateHash: string): Promise<Pod> {
    const namespace = d.metadata!.namespace!;
    const deployment = d.metadata!.name!;
    const name = `${deployment}-${templateHash.slice(0, 5)}-${++podCounter}`;
    const spec = d.spec!.template.spec!;
    const container = spec.containers[0]!;
    const dir = mkdtempSync(join(tmpdir(), `kubelet-${name}-`));
    let env: Record<string, string>;
    try {
      env = await resolveEnv(core, namespace, name, container, await materializeVolumes(core, d, dir, container));
    } catch (err) {
      rmSync(dir, { recursive: true, force: true });
      throw err; // a Secret or ConfigMap not there yet: the next sync tries again
    }
    const ports = new Map<number, number>();
    for (const [key, value] of Object.entries(env)) {
      const m = /^0\.0\.0\.0:(\d+)$/.exec(value);
      if (key.endsWith('_BIND') && m !== null) {
        const local = await freePort();
        ports.set(Number(m[1]), local);
        env[key] = `127.0.0.1:${local}`;
      }
    }
    const namedPorts = new Map<string, number>();
    for (const p of container.ports ?? []) if (p.name !== undefined) namedPorts.set(p.name, p.containerPort);
    const pod: Pod = {
      name,
      namespace,
      deployment,
      templateHash,
      labels: { ...(d.spec!.template.metadata?.labels ?? {}) },
      spec: container,
      ports,
      namedPorts,
      env,
      dir,
      graceMs: (spec.terminationGracePeriodSeconds ?? 30) * 1000,
      minReadyMs: (d.spec!.minReadySeconds ?? 0) * 1000,
      createdAt: Date.now(),
      container: spawnContainer(name, env),
      history: '',
      restarts: 0,
      started: false,
      ready: false,
      readySince: undefined,
      terminating: false,
      gone: undefined,
      restartTimer: undefined,
      get available(): boolean {
        return this.ready && !this.terminating && Date.now() - (this.readySince ?? Infinity) >= this.minReadyMs;
      },
    };
    record(pod, 'Created');
    watchContainer(pod);
    return pod;
  }

  /** Pod deletion: out of the endpoints at once, SIGTERM, SIGKILL after the grace period, then gone. */
  function deletePod(pod: Pod): Promise<void> {
    if (pod.gone !== undefined) return pod.gone;
    pod.terminating = true;
    record(pod, 'Killing', `SIGTERM, SIGKILL after ${pod.graceMs} ms`);
    clearTimeout(pod.restartTimer);
    pod.gone = (async () => {
      const status = await terminate(pod.container.child, pod.container.exited, pod.graceMs);
      record(pod, 'Exited', `code ${String(status.code)}, signal ${String(status.signal)}`);
      rmSync(pod.dir, { recursive: true, force: true });
      const list = podsOf(`${pod.namespace}/${pod.deployment}`);
      list.splice(list.indexOf(pod), 1);
    })();
    return pod.gone;
  }

  async function syncDeployment(d: V1Deployment): Promise<void> {
    const key = `${d.metadata!.namespace!}/${d.metadata!.name!}`;
    const templateHash = hash(d.spec!.template);
    const desired = d.spec!.replicas ?? 1;
    const current = podsOf(key);
    const plan = planRollout({ desired, templateHash, strategy: d.spec!.strategy, pods: current });
    for (const p of plan.terminate) void deletePod(p);
    for (let i = 0; i < plan.create; i++) current.push(await createPod(d, templateHash));
    await writeStatus(d, templateHash, desired, current);
  }

  async function writeStatus(d: V1Deployment, templateHash: string, desired: number, all: Pod[]): Promise<void> {
    const active = all.filter((p) => !p.terminating);
    const updated = active.filter((p) => p.templateHash === templateHash).length;
    const ready = active.filter((p) => p.ready).length;
    const available = active.filter((p) => p.available).length;
    // MaxUnavailable of deployment_util.go: 0 for Recreate, at most the replicas.
    const maxUnavailable =
      d.spec!.strategy?.type === 'Recreate'
        ? 0
        : Math.min(resolveFenceposts(d.spec!.strategy, desired).maxUnavailable, desired);
    const isAvailable = available >= desired - maxUnavailable;
    const complete = updated === desired && active.length === desired && available === desired;
    const conditions: V1DeploymentCondition[] = [
      {
        type: 'Available',
        status: isAvailable ? 'True' : 'False',
        reason: isAvailable ? 'MinimumReplicasAvailable' : 'MinimumReplicasUnavailable',
        message: isAvailable
          ? 'Deployment has minimum availability.'
          : 'Deployment does not have minimum availability.',
      },
      {
        type: 'Progressing',
        status: 'True',
        reason: complete ? 'NewReplicaSetAvailable' : 'ReplicaSetUpdated',
        message: complete
          ? `ReplicaSet of template ${templateHash} has successfully progressed.`
          : `ReplicaSet of template ${templateHash} is progressing.`,
      },
    ];
    const status = {
      observedGeneration: d.metadata!.generation ?? 1,
      replicas: active.length,
      updatedReplicas: updated,
      readyReplicas: ready,
      availableReplicas: available,
      unavailableReplicas: Math.max(0, active.length - available),
      conditions,
    };
    const previous = d.status ?? {};
    const same =
      previous.observedGeneration === status.observedGeneration &&
      (previous.replicas ?? 0) === status.replicas &&
      (previous.updatedReplicas ?? 0) === status.updatedReplicas &&
      (previous.readyReplicas ?? 0) === status.readyReplicas &&
      (previous.availableReplicas ?? 0) === status.availableReplicas &&
      JSON.stringify((previous.conditions ?? []).map((c) => [c.type, c.status, c.reason])) ===
        JSON.stringify(conditions.map((c) => [c.type, c.status, c.reason]));
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
    // A deleted Deployment's pods are deleted by the garbage collector, gracefully.
    for (const [key, ps] of pods) {
      if (seen.has(key)) continue;
      for (const p of ps) void deletePod(p);
      if (ps.length === 0) pods.delete(key);
    }
    services = (await core.listServiceForAllNamespaces()).items;
  }

  const run = async (): Promise<void> => {
    while (!stopped) {
      await tick().catch(() => undefined); // the API server may be injecting faults; the next tick retries
      await sleep(options.intervalMs ?? 250);
    }
  };
  const loop = run();

  function endpoints(namespace: string, service: string, port: number): string[] {
    const svc = services.find((s) => s.metadata?.namespace === namespace && s.metadata.name === service);
    if (svc === undefined) return [];
    const sp = svc.spec?.ports?.find((p) => p.port === port);
    if (sp === undefined) return [];
    const target = sp.targetPort ?? port;
    const sel = svc.spec?.selector ?? {};
    const urls: string[] = [];
    for (const ps of pods.values()) {
      for (const p of ps) {
        if (p.namespace !== namespace || !p.ready || p.terminating || hasExited(p.container.child)) continue;
        if (!Object.entries(sel).every(([k, v]) => p.labels[k] === v)) continue;
        const containerPort = typeof target === 'number' ? target : p.namedPorts.get(target);
        const local = containerPort === undefined ? undefined : p.ports.get(containerPort);
        if (local !== undefined) urls.push(loopbackUrl(local));
      }
    }
    return urls;
  }

  return {
    endpoints,
    serviceUrl(namespace, service, port, scheme = 'http') {
      const urls = endpoints(namespace, service, port);
      const url = urls[turn++ % Math.max(1, urls.length)];
      return url === undefined ? CLOSED_PORT_URL : url.replace(/^http:/, `${scheme}:`);
    },
    events: () => [...events],
    async proxy(namespace, service, port) {
      const server = createServer((downstream) => {
        const targets = endpoints(namespace, service, port);
        const target = targets[Math.floor(Math.random() * targets.length)];
        if (target === undefined) {
          downstream.resetAndDestroy();
          return;
        }
        const upstream = connect({ host: LOOPBACK, port: Number(new URL(target).port) });
        downstream.pipe(upstream).pipe(downstream);
        // Either side going away takes the other with it, the way a reset travels through a NATed connection.
        upstream.on('error', () => downstream.destroy());
        downstream.on('error', () => upstream.destroy());
      });
      proxies.push(server);
      await new Promise<void>((resolve) => server.listen(0, LOOPBACK, resolve));
      return loopbackUrl((server.address() as AddressInfo).port);
    },
    pods() {
      return [...pods.values()].flat().map((p) => ({
        name: p.name,
        namespace: p.namespace,
        deployment: p.deployment,
        templateHash: p.templateHash,
        pid: p.container.child.pid ?? -1,
        ready: p.ready,
        terminating: p.terminating,
        restarts: p.restarts,
        output: p.history + p.container.output(),
      }));
    },
    async stop() {
      stopped = true;
      await loop;
      for (const p of proxies) p.close();
      await Promise.all([...pods.values()].flat().map((p) => deletePod(p)));
    },
  };
}
