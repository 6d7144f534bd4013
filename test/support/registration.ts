import type { SdkEndpoint } from './sdk-endpoint.ts';
import { waitFor } from './wait.ts';

/**
 * Registering deployments through a runtime's admin API (`POST /deployments`), the same for Ratchet (in the test
 * process or as a child process) and for restate-server: nothing here imports the runtime.
 */

/** The two listeners a registration touches; `TestRuntime`, `RuntimeProcess`, `RuntimeChild` and `RestateServer` fit. */
export interface RegistrationTarget {
  /** `http://127.0.0.1:<port>`, no trailing slash. */
  readonly adminUrl: string;
  readonly ingressUrl: string;
}

export interface RegistrationAnswer {
  readonly status: number;
  /** The JSON body (`{}` when empty). */
  readonly body: Record<string, unknown>;
}

/** One `POST /deployments` with `{ uri, ...extra }`, whatever it answers: for tests that check the answer itself. */
export async function registerDeployment(
  adminUrl: string,
  uri: string,
  extra: Record<string, unknown> = {},
): Promise<RegistrationAnswer> {
  const res = await fetch(`${adminUrl}/deployments`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ uri, ...extra }),
  });
  const text = await res.text();
  return { status: res.status, body: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>) };
}

export interface RegisterEndpointOptions {
  /** More fields of the request body (`force`, `additional_headers`, …). */
  readonly extra?: Record<string, unknown>;
  /** Sent with the registration and with the ingress polls, e.g. `{ authorization: 'Bearer …' }`. */
  readonly headers?: Record<string, string>;
  /** The answer that counts as success: 201 (created, the default) or 200 (an existing deployment, forced). */
  readonly status?: 200 | 201;
  /** How long the ingress may take to list the services. Default: the suite's `waitFor` default. */
  readonly timeoutMs?: number;
}

export interface RegisteredEndpoint {
  /** The deployment id the admin API answered with. */
  readonly id: string;
  readonly body: Record<string, unknown>;
}

/**
 * Registers `endpoint` (as HTTP/1.1 when it is served over HTTP/1.1) and waits until the target's ingress lists
 * every service it serves in `GET /restate/health`: restate acknowledges a registration before its ingress has the
 * new schema, so a call made right after could be refused. Fails with the admin API's answer unless it is `status`.
 */
export async function registerEndpoint(
  target: RegistrationTarget,
  endpoint: SdkEndpoint,
  options: RegisterEndpointOptions = {},
): Promise<RegisteredEndpoint> {
  const res = await fetch(`${target.adminUrl}/deployments`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...options.headers },
    body: JSON.stringify({
      uri: endpoint.url,
      ...(endpoint.transport === 'h1' ? { use_http_11: true } : {}),
      ...options.extra,
    }),
  });
  const text = await res.text();
  const expected = options.status ?? 201;
  if (res.status !== expected) {
    throw new Error(
      `registering ${endpoint.url} at ${target.adminUrl} answered ${res.status}, not ${expected}: ${text}`,
    );
  }
  const body = JSON.parse(text) as Record<string, unknown>;
  await waitFor(async () => {
    const health = await fetch(`${target.ingressUrl}/restate/health`, { headers: { ...options.headers } });
    const listed = health.ok ? ((await health.json()) as { services?: unknown }).services : undefined;
    const missing = endpoint.services.filter((name) => !(Array.isArray(listed) && listed.includes(name)));
    if (missing.length > 0) {
      throw new Error(`${target.ingressUrl}/restate/health does not list ${missing.join(', ')} yet (${health.status})`);
    }
  }, options.timeoutMs);
  return { id: String(body['id']), body };
}
