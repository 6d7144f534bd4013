import { EffectQueue } from '../../../runtime/src/invoker/effects.ts';
import type { InvokerError } from '../../../runtime/src/invoker/invoker-error.ts';
import type { AttemptHandle, AttemptSpec, AttemptStarter } from '../../../runtime/src/invoker/invoker.ts';
import { FrameDecoder, type Frame } from '../../../runtime/src/protocol/framing.ts';
import type { StateEntry } from '../../../runtime/src/protocol/message-schema.ts';
import { commands, control } from './frames.ts';

/**
 * An invoker without deployments: every attempt the engine starts is recorded and answered by the test, which pushes
 * the effects a deployment would have caused (commands, suspension, End, a transport failure) and reads the frames
 * the engine sent to it. Nothing runs until the test says so.
 */
export class ScriptedInvoker implements AttemptStarter {
  readonly attempts: ScriptedAttempt[] = [];

  start(spec: AttemptSpec): AttemptHandle {
    const attempt = new ScriptedAttempt(spec);
    this.attempts.push(attempt);
    return attempt;
  }

  /** The attempts of an invocation so far, oldest first. */
  of(invocationId: string): ScriptedAttempt[] {
    return this.attempts.filter((a) => a.spec.invocationId === invocationId);
  }
}

export class ScriptedAttempt implements AttemptHandle {
  readonly effects = new EffectQueue();
  /** The journal as it was when the attempt started (the engine's array grows afterwards). */
  readonly journal: { type: number; raw: Buffer }[];
  readonly stateMap: { key: string; value: string }[];
  /** Frames the engine wrote to the deployment during this attempt (notifications). */
  readonly sent: Frame[] = [];
  aborted = false;
  /** The engine refused a frame and closed its side (markTerminal). */
  terminal = false;
  private ended = false;
  private finished = false;
  private readonly decoder = new FrameDecoder();

  constructor(readonly spec: AttemptSpec) {
    this.journal = spec.journal.map((e) => ({ type: e.type, raw: Buffer.from(e.raw) }));
    this.stateMap = spec.stateMap.map((e: StateEntry) => ({
      key: Buffer.from(e.key).toString(),
      value: Buffer.from(e.value).toString(),
    }));
  }

  get canSend(): boolean {
    return this.spec.deployment.protocolType === 'BidiStream' && !this.ended && !this.terminal && !this.finished;
  }

  get isFinished(): boolean {
    return this.finished;
  }

  send(frame: Buffer): void {
    this.sent.push(...this.decoder.push(frame));
  }

  markTerminal(): void {
    this.terminal = true;
  }

  abort(): void {
    this.aborted = true;
    this.finished = true;
    this.effects.close(true);
  }

  // -- what the deployment does ------------------------------------------------------------------------------------

  command(frame: Frame): this {
    this.effects.push({ kind: 'command', frame });
    return this;
  }

  output(value: string): this {
    return this.command(commands.output(value));
  }

  /** Terminal: the SDK suspends, waiting for any of `completions` (or `signals`). */
  suspend(completions: number[], signals: number[] = []): this {
    return this.terminate({ kind: 'suspended', frame: control.suspension(completions, signals) });
  }

  /** Terminal: End (after an Output command, the invocation completes). */
  end(): this {
    return this.terminate({ kind: 'end' });
  }

  /** Terminal: the SDK reports an error (ErrorMessage). */
  error(code: number, message: string, behavior: 'retry' | 'pause' | 'fail' = 'retry', stacktrace = ''): this {
    return this.terminate({ kind: 'error', frame: control.error(code, message, behavior, stacktrace) });
  }

  /** Terminal: the attempt failed without a terminal message (transport error, timeout…). */
  fail(error: InvokerError): this {
    if (this.finished) return this;
    this.finished = true;
    this.effects.push({ kind: 'failed', error });
    this.effects.close();
    return this;
  }

  private terminate(effect: Parameters<EffectQueue['push']>[0]): this {
    if (this.finished) return this;
    this.ended = true;
    this.effects.push(effect);
    this.finished = true;
    this.effects.close();
    return this;
  }
}
