import type { ChildProcess } from 'node:child_process';

/**
 * Shared plumbing for the child processes tests start (Ratchet runtime, restate-server): bounded output capture,
 * exit tracking, and stopping by PID with an escalation deadline.
 */

export interface ExitStatus {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

const MAX_OUTPUT_CHARS = 2_000_000;

/** Collects stdout and stderr interleaved, keeping the last ~2 MB. */
export function captureOutput(child: ChildProcess): () => string {
  let buffer = '';
  const append = (chunk: Buffer): void => {
    buffer += chunk.toString('utf8');
    if (buffer.length > MAX_OUTPUT_CHARS) buffer = buffer.slice(-MAX_OUTPUT_CHARS / 2);
  };
  child.stdout?.on('data', append);
  child.stderr?.on('data', append);
  return () => buffer;
}

export function exitStatus(child: ChildProcess): Promise<ExitStatus> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) {
      resolve({ code: child.exitCode, signal: child.signalCode });
      return;
    }
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
}

export function hasExited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

/** Sends `signal` (if still running) and waits for the exit. */
export async function signalAndWait(
  child: ChildProcess,
  exited: Promise<ExitStatus>,
  signal: NodeJS.Signals,
): Promise<ExitStatus> {
  if (!hasExited(child)) child.kill(signal);
  return exited;
}

/** SIGTERM, then SIGKILL if the process is still there after `graceMs`. */
export async function terminate(
  child: ChildProcess,
  exited: Promise<ExitStatus>,
  graceMs: number,
): Promise<ExitStatus> {
  if (hasExited(child)) return exited;
  child.kill('SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), graceMs);
  });
  const first = await Promise.race([exited, deadline]);
  clearTimeout(timer);
  if (first !== 'timeout') return first;
  child.kill('SIGKILL');
  return exited;
}

// A test worker that dies (or is torn down) must not leave its children running: kill the ones still alive, each by
// its own PID.
const live = new Set<ChildProcess>();
let exitHookInstalled = false;

export function trackChild(child: ChildProcess): void {
  live.add(child);
  child.once('exit', () => live.delete(child));
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once('exit', () => {
      for (const c of live) if (!hasExited(c)) c.kill('SIGKILL');
    });
  }
}

/**
 * Polls `probe` until it returns true, the child exits, or `timeoutMs` passes. Used only inside support code to wait
 * for a freshly started process; tests use `vi.waitFor`/`expect.poll`.
 */
export async function waitUntilReady(options: {
  readonly what: string;
  readonly probe: () => Promise<boolean>;
  readonly child: ChildProcess;
  readonly timeoutMs: number;
  readonly output: () => string;
  readonly intervalMs?: number;
}): Promise<void> {
  const deadline = Date.now() + options.timeoutMs;
  const interval = options.intervalMs ?? 50;
  for (;;) {
    if (hasExited(options.child)) {
      throw new Error(
        `${options.what} exited before it was ready (code ${String(options.child.exitCode)}, signal ${String(options.child.signalCode)}). Output:\n${options.output().slice(-8000)}`,
      );
    }
    if (await options.probe()) return;
    if (Date.now() > deadline) {
      throw new Error(
        `${options.what} not ready after ${options.timeoutMs} ms. Output:\n${options.output().slice(-8000)}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, interval));
  }
}

/** True when `GET url` answers 200 within 2 s; connection errors count as "not yet". */
export async function answers200(url: string): Promise<boolean> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(2000) });
    await response.body?.cancel();
    return response.status === 200;
  } catch {
    return false;
  }
}
