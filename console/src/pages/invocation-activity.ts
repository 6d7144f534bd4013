import { html } from 'htm/preact';
import { api } from '../api.ts';
import { Show, text, useLoad } from '../ui.ts';

/*
 * What an invocation did, from the observability store (the same lines and spans the Loki and Tempo APIs on 3100
 * serve), read through the admin API: `GET /invocations/{id}/logs` and `GET /invocations/{id}/trace`.
 */

export interface LogLine {
  readonly timestamp: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly line: string;
}

export interface TraceSpan {
  readonly trace_id: string;
  readonly span_id: string;
  readonly parent_span_id: string;
  readonly name: string;
  readonly start_ns: string;
  readonly end_ns: string;
  readonly status_code: number;
  readonly status_message: string;
  readonly attributes: Readonly<Record<string, unknown>>;
  readonly events: readonly { time_ns: string; name: string; attributes: Readonly<Record<string, unknown>> }[];
  readonly node: string | null;
}

/** A stored line's level, message and the fields worth a glance (Restate's JSON lines; any other text as it is). */
export function lineParts(l: LogLine): { level: string; message: string; detail: string } {
  try {
    const o = JSON.parse(l.line) as { level?: unknown; fields?: Record<string, unknown> };
    const f = o.fields ?? {};
    const detail = [
      f['restate.invocation.event'] === undefined ? '' : `event ${text(f['restate.invocation.event'])}`,
      f['restate.invocation.attempt'] === undefined ? '' : `attempt ${text(f['restate.invocation.attempt'])}`,
      f['restate.error.code'] === undefined ? '' : text(f['restate.error.code']),
    ]
      .filter((d) => d !== '')
      .join(', ');
    return {
      level: typeof o.level === 'string' ? o.level : (l.labels.level ?? '').toUpperCase(),
      message: typeof f.message === 'string' ? f.message : l.line,
      detail,
    };
  } catch {
    return { level: (l.labels.level ?? '').toUpperCase(), message: l.line, detail: '' };
  }
}

/** Why a paused invocation is paused, in its own words: the message of its last `paused` line, if it has one. */
export function pauseReason(lines: readonly LogLine[]): string | undefined {
  for (let i = lines.length - 1; i >= 0; i--) {
    const l = lines[i]!;
    if (!l.line.includes('"restate.invocation.event":"paused"')) continue;
    return lineParts(l).message;
  }
  return undefined;
}

export function useInvocationLogs(id: string, since: string | undefined) {
  return useLoad(
    () =>
      api<{ lines: LogLine[]; limited: boolean }>(
        'GET',
        `/invocations/${encodeURIComponent(id)}/logs${since === undefined ? '' : `?since=${encodeURIComponent(since)}`}`,
      ),
    [id, since],
    5000,
  );
}

export function InvocationLogs({ loaded }: { loaded: ReturnType<typeof useInvocationLogs>[0] }) {
  return html`<section aria-labelledby="logs-heading">
    <h2 id="logs-heading">Logs</h2>
    <${Show} loaded=${loaded}>
      ${(v: { lines: LogLine[]; limited: boolean }) =>
        v.lines.length === 0
          ? html`<p>No log lines for this invocation (yet).</p>`
          : html`<div class="table-wrap">
              <table class="logs" aria-label="Log lines">
                <thead>
                  <tr>
                    <th scope="col">Time</th>
                    <th scope="col">Level</th>
                    <th scope="col">Message</th>
                    <th scope="col">Node</th>
                  </tr>
                </thead>
                <tbody>
                  ${v.lines.map((l) => {
                    const p = lineParts(l);
                    return html`<tr class=${`level-${p.level.toLowerCase()}`}>
                      <td><time>${l.timestamp}</time></td>
                      <td>${p.level}</td>
                      <td>${p.message}${p.detail === '' ? null : html` <span class="detail">(${p.detail})</span>`}</td>
                      <td>${l.labels.node ?? '—'}</td>
                    </tr>`;
                  })}
                </tbody>
              </table>
              ${v.limited ? html`<p class="notice">Only the first ${v.lines.length} lines are shown.</p>` : null}
            </div>`}
    <//>
  </section>`;
}

/** Spans in tree order (each after its parent), with their depth. */
function treeOrder(spans: readonly TraceSpan[]): { span: TraceSpan; depth: number }[] {
  const ids = new Set(spans.map((s) => s.span_id));
  const children = new Map<string, TraceSpan[]>();
  const roots: TraceSpan[] = [];
  for (const s of [...spans].sort((a, b) => (BigInt(a.start_ns) < BigInt(b.start_ns) ? -1 : 1))) {
    if (s.parent_span_id !== '' && ids.has(s.parent_span_id)) {
      children.set(s.parent_span_id, [...(children.get(s.parent_span_id) ?? []), s]);
    } else roots.push(s);
  }
  const out: { span: TraceSpan; depth: number }[] = [];
  const visit = (s: TraceSpan, depth: number): void => {
    out.push({ span: s, depth });
    for (const c of children.get(s.span_id) ?? []) visit(c, depth + 1);
  };
  for (const r of roots) visit(r, 0);
  return out;
}

function ms(ns: bigint): string {
  return `${(Number(ns) / 1e6).toFixed(Number(ns) < 10e6 ? 2 : 1)} ms`;
}

export function InvocationTrace({ id, since }: { id: string; since: string | undefined }) {
  const [loaded] = useLoad(
    () =>
      api<{ trace_ids: string[]; spans: TraceSpan[] }>(
        'GET',
        `/invocations/${encodeURIComponent(id)}/trace${since === undefined ? '' : `?since=${encodeURIComponent(since)}`}`,
      ),
    [id, since],
    5000,
  );
  return html`<section aria-labelledby="trace-heading">
    <h2 id="trace-heading">Trace</h2>
    <${Show} loaded=${loaded}>
      ${(v: { trace_ids: string[]; spans: TraceSpan[] }) => {
        if (v.spans.length === 0) return html`<p>No spans for this invocation (yet).</p>`;
        const start = v.spans.reduce(
          (m, s) => (BigInt(s.start_ns) < m ? BigInt(s.start_ns) : m),
          BigInt(v.spans[0]!.start_ns),
        );
        const end = v.spans.reduce((m, s) => (BigInt(s.end_ns) > m ? BigInt(s.end_ns) : m), BigInt(v.spans[0]!.end_ns));
        const total = end > start ? end - start : 1n;
        const scale = (ns: bigint): number => Number(((ns - start) * 1000n) / total);
        return html`<p>
            Trace ${v.trace_ids.map((t) => html`<code>${t}</code> `)} — ${v.spans.length} spans over ${ms(end - start)}
          </p>
          <ol class="trace" aria-label="Spans">
            ${treeOrder(v.spans).map(({ span: s, depth }) => {
              const from = BigInt(s.start_ns);
              const to = BigInt(s.end_ns);
              const x = scale(from);
              const w = Math.max(2, scale(to) - x);
              const failed = s.status_code === 2;
              return html`<li class=${failed ? 'span span-error' : 'span'} data-depth=${depth}>
                <div class="span-name">
                  ${'· '.repeat(depth)}<strong>${s.name}</strong>${' '}<span class="detail"
                    >+${ms(from - start)}, ${ms(to - from)}${s.node === null ? '' : `, ${s.node}`}</span
                  >
                  ${failed ? html` <span class="error-text">${s.status_message}</span>` : null}
                </div>
                <svg class="span-bar" viewBox="0 0 1000 8" preserveAspectRatio="none" aria-hidden="true">
                  <rect x=${x} y="0" width=${w} height="8" />
                </svg>
                ${
                  s.events.length === 0
                    ? null
                    : html`<ul class="span-events">
                        ${s.events.map(
                          (e) =>
                            html`<li>
                              ${e.name}
                              ${
                                e.attributes['exception.message'] === undefined
                                  ? null
                                  : html`: <span class="error-text">${text(e.attributes['exception.message'])}</span>`
                              }
                            </li>`,
                        )}
                      </ul>`
                }
              </li>`;
            })}
          </ol>`;
      }}
    <//>
  </section>`;
}
