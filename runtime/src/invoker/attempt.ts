import { FrameDecoder, type Frame } from '../protocol/framing.ts';
import { MessageTooLargeError } from '../protocol/errors.ts';
import type { ErrorCode } from '../errors/codes.ts';
import type { Exchange, ExchangeHandlers, ExchangeRequest } from '../service-client/transport.ts';

export interface AttemptFailure {
  code: ErrorCode;
  message: string;
  /** Delay requested by the deployment (Retry-After), in ms. */
  retryAfterMs?: number;
}

/** The engine's side of an attempt: it receives frames in stream order and exactly one end. */
export interface AttemptSink {
  onFrame(attempt: Attempt, frame: Frame): void;
  /** The attempt ended without a terminal frame being accepted (transport error, timeout, bad response). */
  onFailed(attempt: Attempt, failure: AttemptFailure): void;
}

export interface AttemptOptions {
  request: ExchangeRequest;
  open: (req: ExchangeRequest, handlers: ExchangeHandlers) => Exchange;
  bidi: boolean;
  contentType: string;
  inactivityTimeoutMs: number;
  abortTimeoutMs: number;
  maxMessageSize: number;
}

/**
 * One attempt: a single HTTP exchange with the deployment. It turns bytes into frames and timeouts into failures; it
 * never touches storage. In bidi mode the request body stays open for notifications until the SDK sends a terminal
 * frame or nothing flowed for the inactivity timeout, when ending the body asks the SDK to suspend.
 */
export class Attempt {
  private exchange: Exchange | undefined;
  private readonly decoder: FrameDecoder;
  private requestEnded = false;
  private finished = false;
  /** Set once the engine accepted a terminal frame (End, Suspension, Error). */
  private terminal = false;
  private inactivityTimer: NodeJS.Timeout | undefined;
  private abortTimer: NodeJS.Timeout | undefined;
  private errorBody: Buffer[] | undefined;
  private statusError: AttemptFailure | undefined;

  constructor(
    readonly id: number,
    private readonly options: AttemptOptions,
    private readonly sink: AttemptSink,
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
    this.exchange = this.options.open(this.options.request, {
      onResponse: (status, headers) => this.onResponse(status, headers),
      onData: (chunk) => this.onData(chunk),
      onEnd: () => this.onEnd(),
      onError: (err) => this.fail({ code: 'RT0010', message: `network error with the deployment: ${err.message}` }),
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

  /** The engine accepted a terminal frame: close our side and let the SDK finish its response. */
  markTerminal(): void {
    this.terminal = true;
    this.endRequest();
  }

  /** Stops the attempt from the runtime side (shutdown, cancellation of the attempt, lost lease). */
  abort(): void {
    this.finish();
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
      this.fail({
        code: 'RT0001',
        message: `the deployment sent nothing for ${this.options.abortTimeoutMs} ms after the request stream was closed (abort timeout)`,
      });
      this.exchange?.abort();
    }, this.options.abortTimeoutMs);
    this.abortTimer.unref();
  }

  private armInactivity(): void {
    this.clearInactivity();
    if (this.requestEnded || this.finished) return;
    this.inactivityTimer = setTimeout(() => this.endRequest(), this.options.inactivityTimeoutMs);
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
        this.statusError = {
          code: 'RT0012',
          message: `the deployment answered with content-type '${contentType ?? ''}', expected '${this.options.contentType}'`,
        };
        this.errorBody = [];
      }
      return;
    }
    this.errorBody = [];
    const retryAfter = parseRetryAfter(headers['retry-after']);
    if (status === 413) {
      this.statusError = { code: 'RT0019', message: 'the deployment answered 413 Payload Too Large' };
    } else if (status === 429 || status === 503) {
      this.statusError = {
        code: 'RT0023',
        message: `the deployment answered ${status}`,
        ...(retryAfter === undefined ? {} : { retryAfterMs: retryAfter }),
      };
    } else if (status === 415) {
      this.statusError = {
        code: 'RT0013',
        message: 'the deployment does not support the pinned protocol version (415)',
      };
    } else if (status === 502 || status === 504) {
      this.statusError = { code: 'RT0010', message: `the deployment is unavailable (${status})` };
    } else {
      this.statusError = { code: 'RT0006', message: `the deployment answered HTTP ${status}` };
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
      if (err instanceof MessageTooLargeError) {
        this.fail({ code: 'RT0003', message: err.message });
      } else {
        this.fail({ code: 'RT0012', message: (err as Error).message });
      }
      this.exchange?.abort();
      return;
    }
    if (this.requestEnded) {
      this.armAbort();
    } else if (this.options.bidi) {
      this.armInactivity();
    }
    for (const f of frames) {
      if (this.finished || this.terminal) return;
      this.sink.onFrame(this, f);
    }
  }

  private onEnd(): void {
    if (this.finished) return;
    if (this.statusError !== undefined) {
      const body = Buffer.concat(this.errorBody ?? [])
        .toString('utf8')
        .trim();
      this.fail({
        ...this.statusError,
        message: body === '' ? this.statusError.message : `${this.statusError.message}: ${body}`,
      });
      return;
    }
    if (this.terminal) {
      this.finish();
      return;
    }
    this.fail({
      code: 'RT0006',
      message: this.decoder.hasRemainder()
        ? 'the response stream ended in the middle of a message'
        : 'the response stream ended without End, Suspension or Error',
    });
  }

  private fail(failure: AttemptFailure): void {
    if (this.finished) return;
    if (this.terminal) {
      // The outcome was already decided by a terminal frame; a late transport error changes nothing.
      this.finish();
      return;
    }
    this.finish();
    this.sink.onFailed(this, failure);
  }

  private finish(): void {
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
