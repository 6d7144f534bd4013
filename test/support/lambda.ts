import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { exitStatus, terminate, trackChild, type ExitStatus } from './child-process.ts';
import { freePort } from './ports.ts';
import { REPO_ROOT } from './runtime-process.ts';

/**
 * A real Lambda Invoke API on loopback: `serverless` 3 with `serverless-offline` 13 (npm) serves functions written as
 * ES modules, and the AWS SDK's `LambdaClient` (with `endpoint` set to `url`) invokes them as it invokes AWS Lambda.
 * Each function is a module whose source is given; it runs in the project's node_modules (so it can import the
 * Restate SDK's `@restatedev/restate-sdk/lambda`), with the `Promise.withResolvers` polyfill the SDK needs on Node 20
 * installed before its code runs. serverless-offline is started and stopped by PID.
 *
 * Unlike AWS, serverless-offline finds a function by its exact name only. Each function is therefore deployed under
 * its qualified ARN as its name, so that `InvokeCommand({ FunctionName: <qualified ARN> })` (what Ratchet and restate
 * send) finds it; a name, an unqualified ARN or another qualifier is ResourceNotFoundException, as on AWS for a
 * function that does not exist.
 */
export interface LocalLambda {
  /** `http://127.0.0.1:<port>`: the Invoke API (`AWS_ENDPOINT_URL_LAMBDA`, or `endpoint` of `LambdaClient`). */
  readonly url: string;
  readonly region: string;
  /** The function's name in its ARN (`<service>-<stage>-<function>`). */
  functionName(fn: string): string;
  /** The function's qualified ARN (with its qualifier, `$LATEST` by default): the name it is deployed under. */
  arn(fn: string): string;
  /** Everything serverless-offline printed so far. */
  output(): string;
  stop(): Promise<ExitStatus>;
}

export interface StartLocalLambdaOptions {
  /** Function name → the source of its ES module, which exports `handler`. */
  readonly functions: Record<string, string>;
  /** Function name → its version or alias (default `$LATEST`). */
  readonly qualifiers?: Record<string, string>;
  readonly region?: string;
  readonly timeoutMs?: number;
}

const SERVICE = 'ratchet-test';
const STAGE = 'dev';
/** The account id serverless-offline puts in its context (`invokedFunctionArn`). */
export const LOCAL_ACCOUNT = '123456789012';

const POLYFILL = `if (typeof Promise.withResolvers !== 'function') {
  Promise.withResolvers = function withResolvers() {
    let resolve, reject;
    const promise = new Promise((res, rej) => { resolve = res; reject = rej; });
    return { promise, resolve, reject };
  };
}
`;

export async function startLocalLambda(options: StartLocalLambdaOptions): Promise<LocalLambda> {
  const region = options.region ?? 'eu-central-1';
  // Inside the repository, so that the functions resolve the project's node_modules.
  const dir = join(REPO_ROOT, '.test-data', `lambda-${randomUUID()}`);
  await mkdir(dir, { recursive: true });
  const names = Object.keys(options.functions);
  await writeFile(join(dir, 'polyfill.mjs'), POLYFILL);
  for (const name of names) {
    // The polyfill module is evaluated before the function's own imports (module order).
    await writeFile(join(dir, `${name}.impl.mjs`), options.functions[name]!);
    await writeFile(
      join(dir, `${name}.mjs`),
      `import './polyfill.mjs';\nexport { handler } from './${name}.impl.mjs';\n`,
    );
  }
  const functionName = (fn: string): string => `${SERVICE}-${STAGE}-${fn}`;
  const arn = (fn: string): string =>
    `arn:aws:lambda:${region}:${LOCAL_ACCOUNT}:function:${functionName(fn)}:${options.qualifiers?.[fn] ?? '$LATEST'}`;
  const yaml = [
    `service: ${SERVICE}`,
    "frameworkVersion: '3'",
    'provider:',
    '  name: aws',
    '  runtime: nodejs20.x',
    `  region: ${region}`,
    `  stage: ${STAGE}`,
    'functions:',
    ...names.flatMap((name) => [
      `  ${name}:`,
      `    handler: ${name}.handler`,
      `    name: '${arn(name)}'`,
      '    timeout: 30',
    ]),
    'plugins:',
    '  - serverless-offline',
    '',
  ].join('\n');
  await writeFile(join(dir, 'serverless.yml'), yaml);

  const [lambdaPort, httpPort, websocketPort] = [await freePort(), await freePort(), await freePort()];
  const child: ChildProcess = spawn(
    join(REPO_ROOT, 'node_modules', '.bin', 'serverless'),
    [
      'offline',
      'start',
      '--host',
      '127.0.0.1',
      '--lambdaPort',
      String(lambdaPort),
      '--httpPort',
      String(httpPort),
      '--websocketPort',
      String(websocketPort),
      '--noTimeout',
    ],
    {
      cwd: dir,
      env: { ...process.env, SLS_TELEMETRY_DISABLED: '1', SLS_NOTIFICATIONS_MODE: 'off', SLS_DEPRECATION_DISABLE: '*' },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  trackChild(child);
  const exited = exitStatus(child);
  let output = '';
  const collect = (chunk: Buffer): void => {
    output += chunk.toString('utf8');
    if (output.length > 1_000_000) output = output.slice(-500_000);
  };
  child.stdout!.on('data', collect);
  child.stderr!.on('data', collect);
  const url = `http://127.0.0.1:${lambdaPort}`;
  const timeoutMs = options.timeoutMs ?? 60_000;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`serverless-offline did not listen within ${timeoutMs} ms:\n${output}`)),
      timeoutMs,
    );
    const check = (): void => {
      if (output.includes(`listening on ${url}`)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on('data', check);
    child.stderr!.on('data', check);
    void exited.then((s) => {
      clearTimeout(timer);
      reject(new Error(`serverless-offline exited (code ${s.code}, signal ${s.signal}) before listening:\n${output}`));
    });
  });
  return {
    url,
    region,
    functionName,
    arn,
    output: () => output,
    stop: async () => {
      const status = await terminate(child, exited, 10_000);
      await rm(dir, { recursive: true, force: true });
      return status;
    },
  };
}
