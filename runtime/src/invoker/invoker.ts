import type { Logger } from 'pino';
import { encodeFrame } from '../protocol/framing.ts';
import { LOG_FIELDS } from '../telemetry/logger.ts';
import type { StateEntry } from '../protocol/message-schema.ts';
import { encodeStart } from '../protocol/messages.ts';
import { MessageType } from '../protocol/message-types.ts';
import { invocationContentType } from '../protocol/version.ts';
import { parseFunctionArn, type FunctionArn } from '../lambda/arn.ts';
import type { LambdaFunctions } from '../lambda/functions.ts';
import { openLambdaExchange } from '../lambda/transport.ts';
import type { DeploymentEndpoint } from '../schema/types.ts';
import type { Exchange, ExchangeHandlers, Http1Client, Http2Client } from '../service-client/transport.ts';
import { Attempt } from './attempt.ts';
import type { Effect } from './effects.ts';

export interface InvokerOptions {
  clusterName: string;
  /** Warnings about attempts (a deployment that accepted an attempt and stays silent). */
  logger?: Logger;
  /** Defaults for handlers and services that set none. */
  inactivityTimeoutMs: number;
  abortTimeoutMs: number;
  messageSizeLimit: number;
  http2: Http2Client;
  http1: Http1Client;
  lambda: LambdaFunctions;
}

/** The deployment an attempt goes to, as pinned by the invocation. */
export interface AttemptDeployment {
  endpoint: DeploymentEndpoint;
  protocolType: 'BidiStream' | 'RequestResponse';
  additionalHeaders: Record<string, string>;
}

/** Everything one attempt of an invocation needs: who it is, where it goes, and the durable journal it replays. */
export interface AttemptSpec {
  invocationId: string;
  /** The id in Restate's binary form (awakeable ids embed it). */
  rawInvocationId: Uint8Array;
  serviceName: string;
  handlerName: string;
  serviceKey: string | null;
  deployment: AttemptDeployment;
  protocolVersion: number;
  /** The journal as durable now, input first: replayed in the request, in order. */
  journal: readonly { type: number; raw: Uint8Array }[];
  /** The key's state sent eagerly, or `partialState` with none (lazy state, or no key). */
  stateMap: StateEntry[];
  partialState: boolean;
  retryCountSinceLastStoredEntry: number;
  durationSinceLastStoredEntryMs: number;
  randomSeed: bigint;
  /** The handler's (or its service's) own timeouts; the invoker's defaults apply where they say nothing. */
  inactivityTimeoutMs?: number | undefined;
  abortTimeoutMs?: number | undefined;
  /**
   * The invocation's W3C trace context (`traceparent`, then after a space its `tracestate`): sent as the W3C headers,
   * so that the SDK's spans join the invocation's trace.
   */
  traceContext?: string | null | undefined;
  /** Flow control: sent in Start from protocol V7 on (the SDK shows them in `ctx.request()`). */
  scope?: string | null | undefined;
  limitKey?: string | null | undefined;
}

/** The engine's hold on a running attempt: its effects to read, and the few things it asks of it. */
export interface AttemptHandle {
  /** What the deployment sent, in stream order (see Effect); ends after the terminal effect or an abort. */
  readonly effects: AsyncIterable<Effect>;
  /** Whether notifications can still be written to the deployment in this attempt (bidi streams). */
  readonly canSend: boolean;
  readonly isFinished: boolean;
  send(frame: Buffer): void;
  /** Ends the attempt at a frame the engine refused: our side closes and the SDK finishes its response. */
  markTerminal(): void;
  /** Stops the attempt from the runtime side (shutdown, pause, lost partition). */
  abort(): void;
}

/** What the engine needs of an invoker: start an attempt. */
export interface AttemptStarter {
  start(spec: AttemptSpec): AttemptHandle;
}

/**
 * Runs attempts: for each, the Start message and the journal replay, the path, headers and timeouts, and the
 * transport the deployment speaks (HTTP/2, HTTP/1.1, or a Lambda function's Invoke API). It knows nothing of storage or of the engine; the engine reads each
 * attempt's effects.
 */
export class Invoker implements AttemptStarter {
  private seq = 0;
  /** Parsed function ARNs (a deployment's ARN was checked when it was registered). */
  private readonly functions = new Map<string, FunctionArn>();

  constructor(private readonly options: InvokerOptions) {}

  start(spec: AttemptSpec): Attempt {
    const { deployment, protocolVersion } = spec;
    const contentType = invocationContentType(protocolVersion);
    const path = `invoke/${encodeURIComponent(spec.serviceName)}/${encodeURIComponent(spec.handlerName)}`;
    const headers: Record<string, string> = {
      ...deployment.additionalHeaders,
      'content-type': contentType,
      accept: contentType,
      'x-restate-invocation-id': spec.invocationId,
      'x-restate-cluster-name': this.options.clusterName,
    };
    if (spec.serviceKey !== null) headers['x-restate-service-key'] = encodeURIComponent(spec.serviceKey);
    if (spec.traceContext !== null && spec.traceContext !== undefined && spec.traceContext !== '') {
      const space = spec.traceContext.indexOf(' ');
      headers.traceparent = space < 0 ? spec.traceContext : spec.traceContext.slice(0, space);
      if (space >= 0) headers.tracestate = spec.traceContext.slice(space + 1);
    }
    const attempt = new Attempt(++this.seq, {
      open: this.opener(deployment.endpoint, path, headers),
      bidi: deployment.protocolType === 'BidiStream',
      contentType,
      inactivityTimeoutMs: spec.inactivityTimeoutMs ?? this.options.inactivityTimeoutMs,
      abortTimeoutMs: spec.abortTimeoutMs ?? this.options.abortTimeoutMs,
      maxMessageSize: this.options.messageSizeLimit,
      onSilent: (ms) => this.silent(spec, ms),
    });
    const start = encodeFrame(
      MessageType.Start,
      encodeStart(
        {
          id: spec.rawInvocationId,
          debugId: spec.invocationId,
          knownEntries: spec.journal.length,
          stateMap: spec.stateMap,
          partialState: spec.partialState,
          key: spec.serviceKey ?? '',
          retryCountSinceLastStoredEntry: spec.retryCountSinceLastStoredEntry,
          durationSinceLastStoredEntry: BigInt(Math.max(0, spec.durationSinceLastStoredEntryMs)),
          randomSeed: spec.randomSeed,
          ...(spec.scope == null ? {} : { scope: spec.scope }),
          ...(spec.limitKey == null ? {} : { limitKey: spec.limitKey }),
        },
        protocolVersion,
      ),
    );
    const frames = [start];
    for (const e of spec.journal) frames.push(encodeFrame(e.type, e.raw));
    attempt.start(frames);
    return attempt;
  }

  private silent(spec: AttemptSpec, ms: number): void {
    this.options.logger?.warn(
      {
        [LOG_FIELDS.invocationId]: spec.invocationId,
        [LOG_FIELDS.invocationTarget]: `${spec.serviceName}/${spec.handlerName}`,
        silentForMs: ms,
      },
      `the deployment accepted the attempt but has sent nothing for ${ms} ms; Ratchet asks it to suspend. If the ` +
        "service's own log shows an error for this invocation (on Node 20 without the Promise.withResolvers " +
        'polyfill the SDK fails with "TypeError: Promise.withResolvers is not a function"), fix the service: the ' +
        'attempt fails with RT0001 after the abort timeout and is retried',
    );
  }

  private opener(
    endpoint: DeploymentEndpoint,
    path: string,
    headers: Record<string, string>,
  ): (handlers: ExchangeHandlers) => Exchange {
    if (endpoint.kind === 'lambda') {
      let fn = this.functions.get(endpoint.arn);
      if (fn === undefined) {
        fn = parseFunctionArn(endpoint.arn);
        this.functions.set(endpoint.arn, fn);
      }
      const req = { fn, assumeRoleArn: endpoint.assumeRoleArn, path: `/${path}`, headers };
      return (h) => openLambdaExchange(this.options.lambda, req, h);
    }
    const url = new URL(path, endpoint.uri);
    const client = endpoint.httpVersion === 'HTTP/1.1' ? this.options.http1 : this.options.http2;
    return (h) => client.open({ url, headers }, h);
  }
}
