import { pino, type Logger } from 'pino';
import { Engine } from '../../../runtime/src/engine/engine.ts';
import type { InvocationObserver, LifecycleEvent } from '../../../runtime/src/engine/observer.ts';
import { Invoker } from '../../../runtime/src/invoker/invoker.ts';
import type { LambdaFunctions } from '../../../runtime/src/lambda/functions.ts';
import { FrameDecoder, encodeFrame } from '../../../runtime/src/protocol/framing.ts';
import { MessageType, encodeMessage } from '../../../runtime/src/protocol/messages.ts';
import type { SchemaRegistry } from '../../../runtime/src/schema/registry.ts';
import type {
  ActiveService,
  DeploymentSchema,
  HandlerSchema,
  HandlerType,
  InputRules,
  ServiceDefaults,
  ServiceType,
} from '../../../runtime/src/schema/types.ts';
import type {
  Exchange,
  ExchangeHandlers,
  ExchangeRequest,
  Http1Client,
  Http2Client,
} from '../../../runtime/src/service-client/transport.ts';
import { MemoryStorage } from '../../../runtime/src/storage/memory/storage.ts';
import { createMetrics } from '../../../runtime/src/telemetry/metrics.ts';

/**
 * The engine as the listeners and the invoker see it, without PostgreSQL and without an SDK: the in-memory store, a
 * fixed schema, and the real invoker (Start message, framing, frame classification, timeouts) talking to a
 * deployment simulated in memory. The simulated deployment answers every attempt like a well-behaved SDK would
 * (Output, End) unless a test gives it the bytes to send instead.
 */

export const FUZZ_DEPLOYMENT_ID = 'dp_11111111111111111111111111';

interface HandlerSpec {
  readonly ty?: HandlerType;
  readonly input: InputRules;
  readonly private?: boolean;
}

const ANY_INPUT: InputRules = { contentType: '*/*', required: false };
const JSON_INPUT: InputRules = { contentType: 'application/json', required: true };
const NO_INPUT: InputRules = { required: false };

/** Services of every type, handlers with every kind of input rule, one private handler. */
export const FUZZ_SERVICES: Record<string, { ty: ServiceType; handlers: Record<string, HandlerSpec> }> = {
  Greeter: {
    ty: 'Service',
    handlers: { greet: { input: ANY_INPUT }, json: { input: JSON_INPUT }, none: { input: NO_INPUT } },
  },
  Counter: {
    ty: 'VirtualObject',
    handlers: { add: { ty: 'Exclusive', input: ANY_INPUT }, get: { ty: 'Shared', input: NO_INPUT } },
  },
  Signup: {
    ty: 'Workflow',
    handlers: { run: { ty: 'Workflow', input: ANY_INPUT }, status: { ty: 'Shared', input: ANY_INPUT } },
  },
  Vault: { ty: 'Service', handlers: { open: { input: ANY_INPUT, private: true } } },
};

export const DEFAULTS: ServiceDefaults = {
  idempotencyRetentionMs: 3_600_000,
  journalRetentionMs: 600_000,
  maxJournalRetentionMs: undefined,
  workflowCompletionRetentionMs: 86_400_000,
  inactivityTimeoutMs: 60_000,
  abortTimeoutMs: 60_000,
  // Fast retries, few of them: a fuzzed attempt that fails is retried at once and answered properly.
  retryPolicy: {
    initialIntervalMs: 1,
    exponentiationFactor: 1,
    maxIntervalMs: 1,
    maxAttempts: 3,
    onMaxAttempts: 'Kill',
  },
};

/** The schema registry as the engine and the ingress read it, over `FUZZ_SERVICES`. */
export class FuzzRegistry {
  readonly defaults = DEFAULTS;
  readonly deploymentSchema: DeploymentSchema = {
    id: FUZZ_DEPLOYMENT_ID,
    endpoint: { kind: 'http', uri: 'http://deployment.invalid:9080/', httpVersion: 'HTTP/2.0' },
    protocolType: 'BidiStream',
    additionalHeaders: {},
    metadata: {},
    minProtocolVersion: 5,
    maxProtocolVersion: 6,
    createdAt: new Date(0),
    services: Object.keys(FUZZ_SERVICES).map((name) => ({ name, revision: 1 })),
  };
  private readonly byName = new Map<string, ActiveService>();

  constructor() {
    for (const [name, s] of Object.entries(FUZZ_SERVICES)) {
      const handlers: HandlerSchema[] = Object.entries(s.handlers).map(([h, spec]) => ({
        name: h,
        ...(spec.ty === undefined ? {} : { ty: spec.ty }),
        input: spec.input,
        output: { contentType: 'application/json', setContentTypeIfEmpty: false },
        retryPolicy: {},
        ...(spec.private === true ? { ingressPrivate: true } : {}),
      }));
      this.byName.set(name, {
        schema: { name, ty: s.ty, handlers, retryPolicy: {} },
        revision: 1,
        deploymentId: FUZZ_DEPLOYMENT_ID,
        overrides: {},
      });
    }
  }

  service(name: string): ActiveService | undefined {
    return this.byName.get(name);
  }

  services(): ActiveService[] {
    return [...this.byName.values()];
  }

  deployment(id: string): DeploymentSchema | undefined {
    return id === FUZZ_DEPLOYMENT_ID ? this.deploymentSchema : undefined;
  }

  /** Engine and ingress are typed with the whole registry; they call only what this one has. */
  asSchemaRegistry(): SchemaRegistry {
    return this as unknown as SchemaRegistry;
  }
}

/** What the simulated deployment sends back for one attempt. */
export interface DeploymentAnswer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  /** The response body, chunk by chunk (each chunk one `data` event). */
  readonly chunks: readonly Buffer[];
}

const END_FRAME = encodeFrame(MessageType.End, encodeMessage(MessageType.End, {}));
const OK_OUTPUT_FRAME = encodeFrame(
  MessageType.OutputCommand,
  encodeMessage(MessageType.OutputCommand, { result: { kind: 'value', value: Buffer.from('"ok"') }, name: '' }),
);

/** A well-behaved SDK: Output (unless the replayed journal already has one), then End. */
function wellBehaved(request: ExchangeRequest, written: readonly Buffer[]): DeploymentAnswer {
  const frames = new FrameDecoder().push(Buffer.concat(written));
  const hasOutput = frames.some((f) => f.type === MessageType.OutputCommand);
  const chunks = hasOutput ? [END_FRAME] : [OK_OUTPUT_FRAME, END_FRAME];
  return { status: 200, headers: { 'content-type': request.headers['content-type'] }, chunks };
}

/**
 * The HTTP/2 (and HTTP/1.1) client the invoker opens exchanges with, answering in memory. `script(invocationId)`
 * may return the answer for an attempt (called once per attempt; undefined = answer like a well-behaved SDK).
 */
export class SimulatedDeployment {
  /** Attempts answered so far, per invocation id. */
  readonly attempts = new Map<string, number>();
  script: (invocationId: string, attempt: number, request: ExchangeRequest) => DeploymentAnswer | undefined = () =>
    undefined;

  open(request: ExchangeRequest, handlers: ExchangeHandlers): Exchange {
    const written: Buffer[] = [];
    let aborted = false;
    const id = request.headers['x-restate-invocation-id'] ?? '';
    const attempt = this.attempts.get(id) ?? 0;
    this.attempts.set(id, attempt + 1);
    // Answers on a later turn, as a network would: the invoker has written Start and the journal by then.
    setImmediate(() => {
      if (aborted) return;
      const answer = this.script(id, attempt, request) ?? wellBehaved(request, written);
      handlers.onResponse(answer.status, answer.headers);
      const send = (i: number): void => {
        if (aborted) return;
        if (i >= answer.chunks.length) {
          handlers.onEnd();
          return;
        }
        handlers.onData(answer.chunks[i]!);
        setImmediate(() => send(i + 1));
      };
      send(0);
    });
    return {
      write: (buf) => {
        written.push(Buffer.from(buf));
      },
      end: () => undefined,
      abort: () => {
        aborted = true;
      },
    };
  }
}

export interface FuzzEngine {
  readonly engine: Engine;
  readonly registry: FuzzRegistry;
  readonly deployment: SimulatedDeployment;
  /** Lifecycle events of each invocation, in order. */
  readonly events: Map<string, LifecycleEvent[]>;
  /** Partition lists the engine reported suspect: an engine failure, never expected here. */
  readonly suspects: number[][];
  stop(): Promise<void>;
}

export async function startFuzzEngine(logger: Logger = pino({ level: 'silent' })): Promise<FuzzEngine> {
  const registry = new FuzzRegistry();
  const deployment = new SimulatedDeployment();
  const client = { open: (req: ExchangeRequest, h: ExchangeHandlers) => deployment.open(req, h) };
  const invoker = new Invoker({
    clusterName: 'fuzz',
    logger,
    inactivityTimeoutMs: 60_000,
    abortTimeoutMs: 60_000,
    messageSizeLimit: 1024 * 1024,
    http2: client as unknown as Http2Client,
    http1: client as unknown as Http1Client,
    lambda: {} as LambdaFunctions,
  });
  const events = new Map<string, LifecycleEvent[]>();
  const suspects: number[][] = [];
  const observer: InvocationObserver = {
    event(inv, e) {
      let list = events.get(inv.id);
      if (list === undefined) events.set(inv.id, (list = []));
      list.push(e);
    },
  };
  const partitions = 4;
  const engine = new Engine(
    { node: 'fuzz', partitions, maxAwaitedFutureDepth: 16, maxProtocolVersion: 6 },
    {
      storage: new MemoryStorage(),
      registry: registry.asSchemaRegistry(),
      invoker,
      logger,
      metrics: createMetrics(),
      observer,
      onSuspect: (p) => suspects.push(p),
    },
  );
  await engine.recover([...Array(partitions).keys()]);
  return { engine, registry, deployment, events, suspects, stop: () => engine.stop() };
}
