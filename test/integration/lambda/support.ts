import { expect } from 'vitest';
import {
  startRecordingProxy,
  type RecordingProxy,
  type RecordingProxyOptions,
} from '../../support/aws-recording-proxy.ts';
import { startLocalLambda, type LocalLambda } from '../../support/lambda.ts';
import { createTestDatabase, type TestDatabase } from '../../support/postgres.ts';
import { startRuntimeProcess, type RuntimeProcess } from '../../support/runtime-process.ts';
import type { FakeSts } from '../../support/sts.ts';

/**
 * What the Lambda tests share: serverless-offline serving Restate SDK Lambda handlers, a recording proxy in front of
 * it (what Ratchet sends, with which credentials; throttling injected on demand), and a Ratchet runtime process whose
 * `AWS_ENDPOINT_URL_LAMBDA` points at the proxy, with static base credentials in the standard AWS environment.
 */

export const BASE_CREDENTIALS = { accessKeyId: 'AKIDRATCHETTEST01', secretAccessKey: 'ratchet-test-secret' };

export interface LambdaLab {
  lambda: LocalLambda;
  proxy: RecordingProxy;
  db: TestDatabase;
  runtime: RuntimeProcess;
  /** The runtime's environment (to start it again after a kill). */
  env: Record<string, string>;
}

export interface LambdaLabOptions {
  functions: Record<string, string>;
  qualifiers?: Record<string, string>;
  env?: Record<string, string>;
  /** The recording proxy's signature check (`verify`) and whether it refuses what fails it (`enforce`). */
  proxy?: Pick<RecordingProxyOptions, 'verify' | 'enforce'>;
  /** An STS double the runtime assumes roles with (`AWS_ENDPOINT_URL_STS`); the caller starts and stops it. */
  sts?: FakeSts;
}

export async function startLambdaLab(options: LambdaLabOptions): Promise<LambdaLab> {
  const lambda = await startLocalLambda({
    functions: options.functions,
    ...(options.qualifiers === undefined ? {} : { qualifiers: options.qualifiers }),
  });
  const proxy = await startRecordingProxy({ target: lambda.url, ...options.proxy });
  const db = await createTestDatabase();
  const env = {
    AWS_ENDPOINT_URL_LAMBDA: proxy.url,
    AWS_ACCESS_KEY_ID: BASE_CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: BASE_CREDENTIALS.secretAccessKey,
    // No shared config or instance metadata on the test machine: only the environment's credentials.
    AWS_CONFIG_FILE: '/nonexistent/aws-config',
    AWS_SHARED_CREDENTIALS_FILE: '/nonexistent/aws-credentials',
    AWS_EC2_METADATA_DISABLED: 'true',
    RATCHET_CLUSTER_NAME: 'lambda-lab',
    ...(options.sts === undefined ? {} : { AWS_ENDPOINT_URL_STS: options.sts.url }),
    ...options.env,
  };
  const runtime = await startRuntimeProcess({ databaseUrl: db.url, env });
  return { lambda, proxy, db, runtime, env };
}

export async function stopLambdaLab(lab: Partial<LambdaLab>): Promise<void> {
  await lab.runtime?.stop();
  await lab.proxy?.stop();
  await lab.lambda?.stop();
  await lab.db?.drop();
}

export async function adminCall(
  adminUrl: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; json: Record<string, unknown>; text: string }> {
  const res = await fetch(`${adminUrl}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? null : JSON.stringify(body),
  });
  const text = await res.text();
  let json: Record<string, unknown> = {};
  try {
    json = text === '' ? {} : (JSON.parse(text) as Record<string, unknown>);
  } catch {
    // not JSON
  }
  return { status: res.status, json, text };
}

/** Registers a function by its ARN and expects 201; returns the deployment id. */
export async function registerFunction(adminUrl: string, body: Record<string, unknown>): Promise<string> {
  const res = await adminCall(adminUrl, 'POST', '/deployments', body);
  expect(res.status, res.text).toBe(201);
  return String(res.json['id']);
}

/** `POST {ingress}/{path}` with a JSON body; the status and the body's text. */
export async function ingressCall(
  ingressUrl: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; text: string }> {
  const res = await fetch(`${ingressUrl}/${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: body === undefined ? null : JSON.stringify(body),
  });
  return { status: res.status, text: await res.text() };
}
