import { mkdirSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import type { CoreV1Api, V1Container, V1Deployment, V1EnvVar, V1Probe } from '@kubernetes/client-node';
import { LOOPBACK, loopbackUrl } from '../ports.ts';

/*
 * What the kubelet (kubelet.ts) makes of a pod template: the container's environment (values, Secret and ConfigMap
 * refs, downward API), its ConfigMap and Secret volumes written to a local directory, and one probe check.
 */

function decode(data: Record<string, string> | undefined, key: string): string | undefined {
  const v = data?.[key];
  return v === undefined ? undefined : Buffer.from(v, 'base64').toString('utf8');
}

export async function resolveEnv(
  core: CoreV1Api,
  namespace: string,
  podName: string,
  container: V1Container,
  mounts: Map<string, string>,
): Promise<Record<string, string>> {
  const env: Record<string, string> = {};
  for (const e of container.env ?? []) env[e.name] = await envValue(core, namespace, podName, e);
  // Paths under a mounted volume point into the pod's temporary directory instead.
  for (const [name, value] of Object.entries(env)) {
    for (const [mountPath, dir] of mounts) {
      if (value === mountPath || value.startsWith(`${mountPath}/`)) env[name] = dir + value.slice(mountPath.length);
    }
  }
  return env;
}

async function envValue(core: CoreV1Api, namespace: string, podName: string, e: V1EnvVar): Promise<string> {
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
export async function materializeVolumes(
  core: CoreV1Api,
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

/** A readiness, liveness or startup check once, as the kubelet's prober does it (2xx and 3xx pass). */
export async function check(
  probe: V1Probe,
  pod: { readonly ports: Map<number, number>; readonly namedPorts: Map<string, number> },
): Promise<boolean> {
  const target = probe.httpGet?.port ?? probe.tcpSocket?.port;
  const containerPort = typeof target === 'string' ? pod.namedPorts.get(target) : target;
  const local = containerPort === undefined ? undefined : pod.ports.get(containerPort);
  if (local === undefined) return false;
  const timeout = AbortSignal.timeout((probe.timeoutSeconds ?? 1) * 1000);
  if (probe.httpGet !== undefined) {
    try {
      const res = await fetch(`${loopbackUrl(local)}${probe.httpGet.path ?? '/'}`, { signal: timeout });
      await res.body?.cancel();
      return res.status >= 200 && res.status < 400;
    } catch {
      return false;
    }
  }
  if (probe.tcpSocket !== undefined) {
    return new Promise<boolean>((resolve) => {
      const socket = connect({ host: LOOPBACK, port: local, signal: timeout }, () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
  }
  return false; // exec and gRPC probes are not supported: the pod never passes them
}
