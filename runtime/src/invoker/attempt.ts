import { FrameDecoder, type Frame } from '../protocol/framing.ts';
import { MessageTooLargeError } from '../protocol/errors.ts';
import { MessageType, isCommand } from '../protocol/message-types.ts';
import type { Exchange, ExchangeHandlers } from '../service-client/transport.ts';
import { EffectQueue, type Effect } from './effects.ts';
import { InvokerError } from './invoker-error.ts';

export interface AttemptOptions {
  /** Opens the exchange with the deployment (HTTP/2, HTTP/1.1 or Lambda), its request already addressed. */
  open: (handlers: ExchangeHandlers) => Exchange;
  bidi: boolean;
  contentType: string;
  inactivityTimeoutMs: number;
  abortTimeoutMs: number;
  maxMessageSize: number;
  /**
   * Called once when the deployment has sent no message at all for the inactivity timeout since the attempt
   * started: a healthy SDK answers the suspension request that follows at once, a broken one (an exception outside
   * the handler, e.g. a missing `Promise.withResolvers` on Node 20) never answers and the attempt only fails after
   * the abort timeout.
   */
  onSilent?: (silentForMs: number) => void;
}

/**
 * One attempt: a single exchange with the deployment (an HTTP request, or a Lambda invoke). It turns bytes into frames, frames into effects and
 * timeouts into failures; it never touches storage and never calls the engine: the engine pulls its effects
 * (`for await (const effect of attempt.effects)`). In bidi mode the request body stays open for notifications until
 * the SDK sends a terminal frame or nothing flowed for the inactivity timeout, when ending the body asks the SDK to
 * suspend.
 */
export class Attempt {
  /** What the deployment sent, in stream order; ends after the terminal effect or when the attempt is aborted. */
  readonly effects = new EffectQueue();
  private exchange: Exchange | undefined;
  private readonly decoder: FrameDecoder;
  private requestEnded = false;
  private finished = false;
  /** Set once a terminal frame (End, Suspension, Error) arrived, or the engine declared the attempt over. */
  private terminal = false;
  private inactivityTimer: NodeJS.Timeout | undefined;
  private abortTimer: NodeJS.Timeout | undefined;
  private errorBody: Buffer[] | undefined;
  private statusError: InvokerError | undefined;
  /** Whether any protocol message arrived in this attempt. */
  private heard = false;

  constructor(
    readonly id: number,
    private readonly options: AttemptOptions,
  ) {
    this.decoder = new FrameDecoder({ maxMessageSize: options.maxMessageSize });
  }

  get isBidi(): boolean {
    return this.options.bidi;
  }

  /** Whether notifications can still be written to the deployment in this attempt. */
  get canSend(): boolean {
    return this.options.bidi && !this.requestEnded && !this.finished;
  }

  get isFinished(): boolean {
    return this.finished;
  }

  start(initial: Buffer[]): void {
    this.exchange = this.options.open({
      onResponse: (status, headers) => this.onResponse(status, headers),
      onData: (chunk) => this.onData(chunk),
      onEnd: () => this.onEnd(),
      // A transport that knows better (Lambda) reports the failure with its own code; anything else is the network.
      onError: (err) =>
        this.fail(
          err instanceof InvokerError
            ? err
            : new InvokerError('RT0010', `network error with the deployment: ${err.message}`),
        ),
    });
    for (const buf of initial) this.exchange.write(buf);
    if (this.options.bidi) this.armInactivity();
    else this.endRequest();
  }

  send(buf: Buffer): void {
    if (!this.canSend || this.exchange === undefined) return;
    this.exchange.write(buf);
    this.armInactivity();
  }

  /** The engine ends the attempt at a frame it refused (too deep an await): close our side and let the SDK finish. */
  markTerminal(): void {
    this.terminal = true;
    this.endRequest();
  }

  /** Stops the attempt from the runtime side (shutdown, cancellation of the attempt, lost lease). */
  abort(): void {
    this.finish();
    this.effects.close(true);
    this.exchange?.abort();
  }

  private endRequest(): void {
    if (this.requestEnded) return;
    this.requestEnded = true;
    this.clearInactivity();
    this.exchange?.end();
    // From here on only the deployment talks; bound how long it may stay silent.
    this.armAbort();
  }

  /** RT0001 is about silence, not total duration: whatever the deployment sends restarts the abort timer. */
  private armAbort(): void {
    if (this.abortTimer !== undefined) clearTimeout(this.abortTimer);
    if (this.finished) return;
    this.abortTimer = setTimeout(() => {
      this.fail(
        new InvokerError(
          'RT0001',
          `the deployment sent nothing for ${this.options.abortTimeoutMs} ms after the request stream was closed (abort timeout)`,
        ),
      );
      this.exchange?.abort();
    }, this.options.abortTimeoutMs);
    this.abortTimer.unref();
  }

  private armInactivity(): void {
    this.clearInactivity();
    if (this.requestEnded || this.finished) return;
    this.inactivityTimer = setTimeout(() => {
      if (!this.heard) this.options.onSilent?.(this.options.inactivityTimeoutMs);
      this.endRequest();
    }, this.options.inactivityTimeoutMs);
    this.inactivityTimer.unref();
  }

  private clearInactivity(): void {
    if (this.inactivityTimer !== undefined) clearTimeout(this.inactivityTimer);
    this.inactivityTimer = undefined;
  }

  private onResponse(status: number, headers: Record<string, string | string[] | undefined>): void {
    if (status === 200) {
      const ct = headers['content-type'];
      const contentType = Array.isArray(ct) ? ct[0] : ct;
      if (contentType !== this.options.contentType && contentType?.split(';')[0]?.trim() !== this.options.contentType) {
        this.statusError = new InvokerError(
          'RT0012',
          `the deployment answered with content-type '${contentType ?? ''}', expected '${this.options.contentType}'`,
        );
        this.errorBody = [];
      }
      return;
    }
    this.errorBody = [];
    const retryAfter = parseRetryAfter(headers['retry-after']);
    if (status === 413) {
      this.statusError = new InvokerError('RT0019', 'the deployment answered 413 Payload Too Large');
    } else if (status === 429 || status === 503) {
      this.statusError = new InvokerError('RT0023', `the deployment answered ${status}`, { retryAfterMs: retryAfter });
    } else if (status === 415) {
      this.statusError = new InvokerError(
        'RT0015',
        `the deployment refused the protocol version negotiated at discovery (415 for '${this.options.contentType}'): ` +
          'the SDK serving it changed without the deployment being registered again. Register it again (under a ' +
          'new URI or ARN) or roll the SDK back',
      );
    } else if (status === 502 || status === 504) {
      this.statusError = new InvokerError('RT0010', `the deployment is unavailable (${status})`);
    } else {
      this.statusError = new InvokerError('RT0006', `the deployment answered HTTP ${status}`);
    }
  }

  private onData(chunk: Buffer): void {
    if (this.finished) return;
    if (this.errorBody !== undefined) {
      if (this.errorBody.reduce((n, b) => n + b.length, 0) < 4096) this.errorBody.push(chunk);
      return;
    }
    let frames: Frame[];
    try {
      frames = this.decoder.push(chunk);
    } catch (err) {
      this.fail(new InvokerError(err instanceof MessageTooLargeError ? 'RT0003' : 'RT0012', (err as Error).message));
      this.exchange?.abort();
      return;
    }
    if (frames.length > 0) this.heard = true;
    if (this.requestEnded) {
      this.armAbort();
    } else if (this.options.bidi) {
      this.armInactivity();
    }
    for (const f of frames) {
      if (this.finished || this.terminal) return;
      const effect = this.classify(f);
      if (effect.kind === 'failed') {
        this.fail(effect.error);
        this.exchange?.abort();
        return;
      }
      this.effects.push(effect);
    }
  }

  /** The effect of one frame; a terminal frame ends our side of the stream (the SDK finishes its response). */
  private classify(frame: Frame): Effect {
    if (isCommand(frame.type)) return { kind: 'command', frame };
    switch (frame.type) {
      case MessageType.ProposeRunCompletion:
        return { kind: 'proposeRun', frame };
      case MessageType.AwaitingOn:
        return { kind: 'awaitingOn', frame };
      case MessageType.Suspension:
        this.markTerminal();
        return { kind: 'suspended', frame };
      case MessageType.Error:
        this.markTerminal();
        return { kind: 'error', frame };
      case MessageType.End:
        this.markTerminal();
        return { kind: 'end' };
      default:
        // Nothing after a message the runtime cannot understand is meaningful: the attempt fails (and is retried).
        return {
          kind: 'failed',
          error: new InvokerError(
            'RT0012',
            `unexpected message type 0x${frame.type.toString(16)} from the deployment`,
            { code: 571 },
          ),
        };
    }
  }

  private onEnd(): void {
    if (this.finished) return;
    if (this.statusError !== undefined) {
      const body = Buffer.concat(this.errorBody ?? [])
        .toString('utf8')
        .trim();
      const e = this.statusError;
      this.fail(
        body === '' ? e : new InvokerError(e.rtCode, `${e.message}: ${body}`, { retryAfterMs: e.retryAfterMs }),
      );
      return;
    }
    if (this.terminal) {
      this.finish();
      return;
    }
    this.fail(
      new InvokerError(
        'RT0006',
        this.decoder.hasRemainder()
          ? 'the response stream ended in the middle of a message'
          : 'the response stream ended without End, Suspension or Error',
      ),
    );
  }

  private fail(error: InvokerError): void {
    if (this.finished) return;
    this.finish();
    // After a terminal frame the outcome is decided; a late transport error changes nothing.
    if (!this.terminal) this.effects.push({ kind: 'failed', error });
    this.effects.close();
  }

  private finish(): void {
    if (this.terminal && !this.finished) this.effects.close();
    this.finished = true;
    this.clearInactivity();
    if (this.abortTimer !== undefined) clearTimeout(this.abortTimer);
  }
}

function parseRetryAfter(v: string | string[] | undefined): number | undefined {
  const s = Array.isArray(v) ? v[0] : v;
  if (s === undefined) return undefined;
  if (/^\d+$/.test(s.trim())) return Number(s.trim()) * 1000;
  const at = Date.parse(s);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}
