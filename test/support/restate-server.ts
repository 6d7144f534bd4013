import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { stringify } from 'smol-toml';
import {
  answers200,
  captureOutput,
  exitStatus,
  signalAndWait,
  terminate,
  trackChild,
  waitUntilReady,
  type ExitStatus,
} from './child-process.ts';
import { bindAddr, freePort, loopbackUrl } from './ports.ts';

/**
 * The real restate-server 1.7.12 (npm `@restatedev/restate-server`), for compatibility tests that run the same
 * scenario against Restate and against Ratchet. Single node, TCP only, everything on 127.0.0.1 free ports, state in a
 * temp dir removed on stop.
 */

export const RESTATE_SERVER_VERSION = '1.7.12';

export interface RestateServerPorts {
  readonly ingress: number;
  readonly admin: number;
  /** Node-to-node "fabric" (metadata server, log server, workers all use it even on a single node). */
  readonly node: number;
}

type TomlTable = Record<string, unknown>;

export interface StartRestateServerOptions {
  /** Top-level `experimental-enable-protocol-v7 = true`; without it the server's maximum is V6. */
  readonly enableProtocolV7?: boolean;
  /** Merged over the generated config (tables deep-merged), e.g. `{ worker: { invoker: { 'inactivity-timeout': '2s' } } }`. */
  readonly config?: TomlTable;
  /** Extra environment, e.g. `RESTATE_LOG_FILTER`. */
  readonly env?: Record<string, string>;
  /** Default 60 s. */
  readonly startTimeoutMs?: number;
}

export interface RestateServer {
  readonly pid: number;
  /** `http://127.0.0.1:<port>` without trailing slash. */
  readonly ingressUrl: string;
  readonly adminUrl: string;
  readonly ports: RestateServerPorts;
  readonly baseDir: string;
  readonly configFile: string;
  output(): string;
  /** Sends `signal` (default SIGKILL) and waits for the exit; the temp dir stays until `stop()`. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** SIGTERM, SIGKILL after 10 s, then removes the temp dir. */
  stop(): Promise<void>;
  readonly exited: Promise<ExitStatus>;
}

const STOP_GRACE_MS = 10_000;

/**
 * The platform package's binary itself, not `node_modules/.bin/restate-server`: that is a node wrapper that spawns
 * the binary, so its PID is not the server's and a signal to it would not reach the server.
 */
export function restateServerBinary(): string {
  const pkg = `@restatedev/restate-server-${process.platform}-${process.arch}`;
  let packageJson: string;
  try {
    packageJson = createRequire(import.meta.url).resolve(`${pkg}/package.json`);
  } catch (err) {
    throw new Error(`${pkg} is not installed (optional dependency of @restatedev/restate-server)`, { cause: err });
  }
  const binary = join(dirname(packageJson), 'bin', 'restate-server');
  if (!existsSync(binary)) throw new Error(`restate-server binary missing at ${binary}`);
  return binary;
}

function isTable(value: unknown): value is TomlTable {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Date);
}

function deepMerge(base: TomlTable, over: TomlTable): TomlTable {
  const merged: TomlTable = { ...base };
  for (const [key, value] of Object.entries(over)) {
    const current = merged[key];
    merged[key] = isTable(current) && isTable(value) ? deepMerge(current, value) : value;
  }
  return merged;
}

export function restateServerConfig(
  ports: RestateServerPorts,
  baseDir: string,
  options: Pick<StartRestateServerOptions, 'enableProtocolV7' | 'config'> = {},
): TomlTable {
  const generated: TomlTable = {
    'node-name': 'ratchet-compat',
    'cluster-name': 'ratchet-compat',
    'base-dir': baseDir,
    // TCP only: the default ("all") also opens Unix sockets under base-dir.
    'listen-mode': 'tcp',
    'bind-address': bindAddr(ports.node),
    'advertised-address': `${loopbackUrl(ports.node)}/`,
    'disable-telemetry': true,
    'log-format': 'compact',
    'log-disable-ansi-codes': true,
    ...(options.enableProtocolV7 === true ? { 'experimental-enable-protocol-v7': true } : {}),
    admin: { 'bind-address': bindAddr(ports.admin), 'advertised-admin-endpoint': `${loopbackUrl(ports.admin)}/` },
    ingress: {
      'bind-address': bindAddr(ports.ingress),
      'advertised-ingress-endpoint': `${loopbackUrl(ports.ingress)}/`,
    },
  };
  return options.config === undefined ? generated : deepMerge(generated, options.config);
}

export async function startRestateServer(options: StartRestateServerOptions = {}): Promise<RestateServer> {
  const binary = restateServerBinary();
  const ports: RestateServerPorts = { ingress: await freePort(), admin: await freePort(), node: await freePort() };
  const workDir = await mkdtemp(join(tmpdir(), 'ratchet-restate-'));
  const baseDir = join(workDir, 'base');
  const configFile = join(workDir, 'restate.toml');
  const config = deepMerge(restateServerConfig(ports, baseDir, options), {
    // The invoker's spill directories default to /tmp/invoker-<id>, one per partition, and may outlive the server.
    worker: { invoker: { 'tmp-dir': join(workDir, 'invoker-tmp') } },
  });
  await writeFile(configFile, stringify(config));

  const child = spawn(binary, ['--config-file', configFile, '--no-logo'], {
    cwd: workDir,
    // RESTATE_* from the caller's shell would override the file; drop them so the config above is what runs.
    env: {
      ...Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('RESTATE_'))),
      // Anything else it writes to a temp dir goes under workDir too, and is removed with it.
      TMPDIR: workDir,
      ...options.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  trackChild(child);
  const output = captureOutput(child);
  const exited = exitStatus(child);
  const removeWorkDir = (): Promise<void> => rm(workDir, { recursive: true, force: true });

  let pid: number;
  try {
    pid = await new Promise<number>((resolve, reject) => {
      child.once('spawn', () => resolve(child.pid ?? -1));
      child.once('error', reject);
    });
  } catch (err) {
    await removeWorkDir();
    throw err;
  }

  const adminUrl = loopbackUrl(ports.admin);
  const ingressUrl = loopbackUrl(ports.ingress);
  try {
    // Compatibility tests use both listeners at once, so wait until both answer.
    await waitUntilReady({
      what: `restate-server (pid ${pid})`,
      probe: async () => (await answers200(`${adminUrl}/health`)) && (await answers200(`${ingressUrl}/restate/health`)),
      child,
      timeoutMs: options.startTimeoutMs ?? 60_000,
      output,
    });
  } catch (err) {
    await signalAndWait(child, exited, 'SIGKILL');
    await removeWorkDir();
    throw err;
  }

  let stopping: Promise<void> | undefined;
  return {
    pid,
    ingressUrl,
    adminUrl,
    ports,
    baseDir,
    configFile,
    output,
    async kill(signal: NodeJS.Signals = 'SIGKILL') {
      await signalAndWait(child, exited, signal);
    },
    stop() {
      stopping ??= (async () => {
        try {
          await terminate(child, exited, STOP_GRACE_MS);
        } finally {
          await removeWorkDir();
        }
      })();
      return stopping;
    },
    exited,
  };
}
