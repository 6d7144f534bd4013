import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import { api, lit, query, type Row } from '../api.ts';
import { ErrorBox, messageOf, Show, text, useLoad } from '../ui.ts';
import { StateEditor } from './state-editor.ts';
import { entryInfo, type EntryInfo } from '../journal.ts';
import { InvocationLogs, InvocationTrace, pauseReason, useInvocationLogs } from './invocation-activity.ts';

/** Why the invocation is paused: the words of its `paused` log line when the store has it. */
function PauseReason({ id, since, failed }: { id: string; since: string | undefined; failed: boolean }) {
  const [logs] = useInvocationLogs(id, since);
  const logged = logs.state === 'done' ? pauseReason(logs.value.lines) : undefined;
  const reason =
    logged ??
    (failed
      ? 'Its retry policy paused it after the failure below: fix the cause, then resume it.'
      : 'It was paused through the admin API: resume it to continue.');
  return html`<p class="pause-reason" data-testid="pause-reason"><strong>Paused:</strong> ${reason}</p>`;
}

/** The invocation's logs and trace, once its creation time is known (they are looked up from then on). */
function Activity({ id, since }: { id: string; since: string | undefined }) {
  const [logs] = useInvocationLogs(id, since);
  return html`<${InvocationLogs} loaded=${logs} /><${InvocationTrace} id=${id} since=${since} />`;
}

/** An admin action on the invocation: confirmed first; the API's message is shown when it refuses. */
interface Action {
  readonly label: string;
  readonly method: string;
  readonly path: (id: string, deployment: string) => string;
  readonly confirm: string;
}

const ACTIONS: readonly Action[] = [
  {
    label: 'Cancel',
    method: 'PATCH',
    path: (id) => `/invocations/${id}/cancel`,
    confirm: 'Cancel this invocation? Its handler sees the cancellation and can compensate.',
  },
  {
    label: 'Kill',
    method: 'PATCH',
    path: (id) => `/invocations/${id}/kill`,
    confirm: 'Kill this invocation? It stops at once, without compensation.',
  },
  { label: 'Pause', method: 'PATCH', path: (id) => `/invocations/${id}/pause`, confirm: 'Pause this invocation?' },
  {
    label: 'Resume',
    method: 'PATCH',
    path: (id, deployment) =>
      `/invocations/${id}/resume${deployment === 'Keep' ? '' : `?deployment=${encodeURIComponent(deployment)}`}`,
    confirm: 'Resume this invocation on the deployment chosen?',
  },
  {
    label: 'Purge',
    method: 'PATCH',
    path: (id) => `/invocations/${id}/purge`,
    confirm: 'Purge this completed invocation and its journal?',
  },
];

function resultText(r: NonNullable<EntryInfo['result']>): string {
  if (r.kind === 'void') return 'void';
  if (r.kind === 'failure') return `failure [${r.code}] ${r.message}`;
  return r.text.length > 300 ? `${r.text.slice(0, 300)}…` : r.text;
}

/** What a command waits for, and the entry that resolved it with what. */
function awaitsText(completion: number, resolved: { index: number; info: EntryInfo } | undefined): string {
  if (resolved === undefined) return `completion ${completion}: not yet`;
  const what = resolved.info.result === undefined ? '' : `: ${resultText(resolved.info.result)}`;
  return `completion ${completion}, resolved by entry ${resolved.index}${what}`;
}

/** One invocation: target, status and why, the journal as a timeline, and the actions. */
export function Invocation({ id }: { id: string }) {
  const [message, setMessage] = useState<{ kind: 'ok' | 'error'; text: string } | undefined>();
  /** `Keep` (its pinned deployment), `Latest`, or a deployment id: for resume and restart-as-new. */
  const [deployment, setDeployment] = useState('Keep');
  const [loaded, reload] = useLoad(
    async () => {
      const [inv] = await query(`SELECT * FROM sys_invocation WHERE id = ${lit(id)}`);
      const journal = await query(
        `SELECT index, entry_type, name, appended_at, raw FROM sys_journal WHERE id = ${lit(id)} ORDER BY index`,
      );
      // What it called, and the state of its object or workflow key.
      const callees = await query(
        `SELECT id, target, status FROM sys_invocation WHERE invoked_by_id = ${lit(id)} ORDER BY created_at LIMIT 100`,
      );
      const keyed = inv !== undefined && typeof inv.target_service_key === 'string';
      const state = keyed
        ? await query(
            `SELECT key, value_utf8, value_length FROM state WHERE service_name = ${lit(String(inv.target_service_name))}
               AND service_key = ${lit(String(inv.target_service_key))} ORDER BY key LIMIT 200`,
          )
        : [];
      const deployments = (await api<{ deployments: { id: string }[] }>('GET', '/deployments')).deployments.map(
        (d) => d.id,
      );
      return { inv, journal, callees, state, keyed, deployments };
    },
    [id],
    3000,
  );
  const restartFrom = async (index: number) => {
    if (!window.confirm(`Restart as a new invocation, keeping the journal up to entry ${index}?`)) return;
    try {
      const q = `from=${index}${deployment === 'Keep' ? '' : `&deployment=${encodeURIComponent(deployment)}`}`;
      const res = await api<{ new_invocation_id: string }>(
        'PATCH',
        `/invocations/${encodeURIComponent(id)}/restart-as-new?${q}`,
      );
      setMessage({ kind: 'ok', text: `Restarted as ${res.new_invocation_id}` });
      location.hash = `/invocation/${res.new_invocation_id}`;
    } catch (err) {
      setMessage({ kind: 'error', text: `Restart as new refused: ${messageOf(err)}` });
    }
  };
  const act = async (a: Action) => {
    if (!window.confirm(a.confirm)) return;
    try {
      await api(a.method, a.path(encodeURIComponent(id), deployment));
      setMessage({ kind: 'ok', text: `${a.label}: accepted` });
      reload();
    } catch (err) {
      setMessage({ kind: 'error', text: `${a.label} refused: ${messageOf(err)}` });
    }
  };
  return html`<section>
    <h1>Invocation <code>${id}</code></h1>
    <${Show} loaded=${loaded}>
      ${(v: {
        inv: Row | undefined;
        journal: Row[];
        callees: Row[];
        state: Row[];
        keyed: boolean;
        deployments: string[];
      }) => {
        const inv = v.inv;
        if (inv === undefined) return html`<${ErrorBox} message=${`No invocation ${id} (never made, or purged)`} />`;
        const code = inv.last_failure_error_code;
        return html`
          <dl class="facts">
            <dt>Target</dt>
            <dd>${text(inv.target)}</dd>
            <dt>Status</dt>
            <dd>
              <span class=${`status status-${String(inv.status)}`} data-testid="status">${text(inv.status)}</span>
            </dd>
            <dt>Deployment</dt>
            <dd><code>${text(inv.pinned_deployment_id)}</code></dd>
            <dt>Created</dt>
            <dd>${text(inv.created_at)}</dd>
            <dt>Retries</dt>
            <dd>${text(inv.retry_count)}</dd>
            ${
              inv.completion_result
                ? html`<dt>Result</dt>
                    <dd>
                      ${text(inv.completion_result)} ${inv.completion_failure ? text(inv.completion_failure) : ''}
                    </dd>`
                : null
            }
            ${
              inv.invoked_by_id
                ? html`<dt>Called by</dt>
                    <dd>
                      <a href=${`#/invocation/${text(inv.invoked_by_id)}`}><code>${text(inv.invoked_by_id)}</code></a>
                    </dd>`
                : null
            }
          </dl>
          ${
            inv.status === 'paused'
              ? html`<${PauseReason} id=${id} since=${sinceOf(inv)} failed=${Boolean(inv.last_failure)} />`
              : null
          }
          ${
            inv.last_failure
              ? html`<div class="failure" role="status">
                  <h2>Last failure</h2>
                  <p>
                    ${code ? html`<a href=${`/ui/errors/${text(code)}`} target="_blank" rel="noopener"><code>${text(code)}</code></a> ` : null}
                    <span data-testid="last-failure">${text(inv.last_failure)}</span>
                  </p>
                </div>`
              : null
          }
          <div class="actions" role="group" aria-label="Actions">
            ${ACTIONS.map((a) => html`<button type="button" onClick=${() => void act(a)}>${a.label}</button>`)}
            <label
              >Deployment for resume and restart
              <select
                value=${deployment}
                onChange=${(e: Event) => setDeployment((e.target as HTMLSelectElement).value)}
              >
                <option value="Keep">its pinned deployment</option>
                <option value="Latest">the latest</option>
                ${v.deployments.map((d) => html`<option value=${d}>${d}</option>`)}
              </select>
            </label>
          </div>
          ${message ? html`<p class=${message.kind === 'ok' ? 'notice' : 'error'} role="alert">${message.text}</p>` : null}
          ${
            v.callees.length === 0
              ? null
              : html`<h2>Called</h2>
                  <ul aria-label="Called">
                    ${v.callees.map(
                      (c) =>
                        html`<li>
                          <a href=${`#/invocation/${text(c.id)}`}><code>${text(c.id)}</code></a> ${text(c.target)}
                          (${text(c.status)})
                        </li>`,
                    )}
                  </ul>`
          }
          ${
            v.keyed
              ? html`<h2>State of ${text(inv.target_service_name)}/${text(inv.target_service_key)}</h2>
                  ${
                    v.state.length === 0
                      ? html`<p>No state.</p>`
                      : html`<${StateEditor}
                          key=${JSON.stringify(v.state)}
                          service=${text(inv.target_service_name)}
                          objectKey=${text(inv.target_service_key)}
                          rows=${v.state}
                          onDone=${reload}
                        />`
                  }`
              : null
          }
          <h2>Journal</h2>
          <ol class="timeline" aria-label="Journal">
            ${(() => {
              const infos = v.journal.map((e) => entryInfo(text(e.entry_type), e.raw as string | null));
              // Which entry completed each completion id: a command shows what resolved it.
              const resolvedBy = new Map<number, { index: number; info: EntryInfo }>();
              infos.forEach((info, i) => {
                if (info?.completes !== undefined && info.result !== undefined && info.result.kind !== 'void')
                  resolvedBy.set(info.completes, { index: Number(v.journal[i]!.index), info });
                else if (info?.completes !== undefined && !resolvedBy.has(info.completes))
                  resolvedBy.set(info.completes, { index: Number(v.journal[i]!.index), info });
              });
              return v.journal.map((e, i) => ({
                e,
                info: infos[i],
                resolved: infos[i]?.awaits === undefined ? undefined : resolvedBy.get(infos[i].awaits),
              }));
            })().map(
              ({ e, info, resolved }) =>
                html`<li>
                  <span class="index">${text(e.index)}</span>
                  <strong>${text(e.entry_type)}</strong>${e.name ? html` <em>${text(e.name)}</em>` : null}
                  <time>${text(e.appended_at)}</time>
                  ${
                    info?.result !== undefined
                      ? html`<div class=${info.result.kind === 'failure' ? 'entry-failure' : 'entry-value'}>
                          ${info.completes !== undefined ? `completion ${info.completes}: ` : info.signal !== undefined ? `${info.signal}: ` : ''}${resultText(info.result)}
                        </div>`
                      : null
                  }
                  ${
                    info?.awaits !== undefined
                      ? html`<div class="entry-awaits">${awaitsText(info.awaits, resolved)}</div>`
                      : null
                  }
                  ${
                    inv.status === 'completed' && Number(e.index) > 0
                      ? html`<button type="button" class="small" onClick=${() => void restartFrom(Number(e.index))}>
                          Restart as new from here
                        </button>`
                      : null
                  }
                </li>`,
            )}
          </ol>
          <${Activity} id=${id} since=${sinceOf(inv)} />
        `;
      }}
    <//>
  </section>`;
}

/** Where to look for an invocation's lines and spans from: a minute before it was created. */
function sinceOf(inv: Row): string | undefined {
  const created = Date.parse(String(inv.created_at));
  return Number.isFinite(created) ? new Date(created - 60_000).toISOString() : undefined;
}
