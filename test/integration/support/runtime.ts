import { loadConfig } from '../../../runtime/src/config/config.ts';
import { createNode, type RuntimeHandle } from '../../../runtime/src/runtime.ts';
import { LogCapture } from '../../../runtime/src/observability/log-capture.ts';
import { createLogger } from '../../../runtime/src/telemetry/logger.ts';

export interface TestRuntime {
  ingressUrl: string;
  adminUrl: string;
  handle: RuntimeHandle;
  stop(): Promise<void>;
}

/** A runtime in the test process, against its own database, on free loopback ports. */
export async function startTestRuntime(databaseUrl: string, env: Record<string, string> = {}): Promise<TestRuntime> {
  const config = loadConfig({
    env: {
      RATCHET_INGRESS_BIND: '127.0.0.1:0',
      RATCHET_ADMIN_BIND: '127.0.0.1:0',
      RATCHET_METRICS_BIND: '127.0.0.1:0',
      RATCHET_INTROSPECTION_BIND: '127.0.0.1:0',
      RATCHET_OBSERVABILITY_BIND: '127.0.0.1:0',
      RATCHET_LOG_LEVEL: process.env['RATCHET_TEST_LOG_LEVEL'] ?? 'silent',
      RATCHET_NODE_NAME: `test-${process.pid}`,
      ...env,
    },
  });
  // As main.ts does: with the store on, the runtime's lines (and invocations' lifecycle lines) reach the log store too.
  const logCapture = new LogCapture();
  const logger = createLogger(
    config.log,
    config.observability.store ? { capture: { stream: logCapture, level: config.observability.logLevel } } : {},
  );
  const handle = await createNode(config, { databaseUrl, logger, logCapture });
  return {
    ingressUrl: `http://127.0.0.1:${handle.ingress.port}`,
    adminUrl: `http://127.0.0.1:${handle.admin.port}`,
    handle,
    stop: () => handle.stop(),
  };
}

export async function call(
  ingressUrl: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; text: string; json: unknown }> {
  const res = await fetch(`${ingressUrl}${path}`, {
    method: 'POST',
    headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = text === '' ? undefined : JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}
