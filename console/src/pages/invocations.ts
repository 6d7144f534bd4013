import { html } from 'htm/preact';
import { lit, query, type Row } from '../api.ts';
import { navigate } from '../router.ts';
import { Show, text, useLoad } from '../ui.ts';

const PAGE = 50;
const STATUSES = ['pending', 'scheduled', 'ready', 'running', 'backing-off', 'suspended', 'paused', 'completed'];

export interface InvocationFilters {
  status?: string;
  service?: string;
  handler?: string;
  key?: string;
  deployment?: string;
  since?: string;
  until?: string;
  where?: string;
  page?: string;
}

const FILTER_KEYS: (keyof InvocationFilters)[] = [
  'status',
  'service',
  'handler',
  'key',
  'deployment',
  'since',
  'until',
  'where',
];

/** The WHERE clause of the filters (each value an SQL literal; the free clause as written, in parentheses). */
export function whereOf(f: InvocationFilters): string {
  const parts: string[] = [];
  if (f.status) parts.push(`status = ${lit(f.status)}`);
  if (f.service) parts.push(`target_service_name = ${lit(f.service)}`);
  if (f.handler) parts.push(`target_handler_name = ${lit(f.handler)}`);
  if (f.key) parts.push(`target_service_key = ${lit(f.key)}`);
  if (f.deployment) parts.push(`pinned_deployment_id = ${lit(f.deployment)}`);
  if (f.since) parts.push(`created_at >= ${lit(f.since)}`);
  if (f.until) parts.push(`created_at < ${lit(f.until)}`);
  if (f.where) parts.push(`(${f.where})`);
  return parts.length === 0 ? '' : `WHERE ${parts.join(' AND ')}`;
}

function hrefOf(f: InvocationFilters): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(f)) if (typeof v === 'string' && v !== '') q.set(k, v);
  const s = q.toString();
  return s === '' ? '#/invocations' : `#/invocations?${s}`;
}

/** Invocations, filtered and paged by the server (SQL over sys_invocation), refreshed every few seconds. */
export function Invocations({ filters }: { filters: InvocationFilters }) {
  const page = Math.max(0, Number(filters.page ?? '0') || 0);
  const where = whereOf(filters);
  const [loaded] = useLoad(
    () =>
      query(
        `SELECT id, target, status, created_at, modified_at, retry_count, last_failure_error_code, last_failure
         FROM sys_invocation ${where} ORDER BY created_at DESC, id LIMIT ${PAGE + 1} OFFSET ${page * PAGE}`,
      ),
    [where, page],
    5000,
  );
  const submit = (e: Event) => {
    e.preventDefault();
    const data = new FormData(e.target as HTMLFormElement);
    const next: InvocationFilters = {};
    for (const k of FILTER_KEYS) {
      const v = data.get(k);
      if (typeof v === 'string' && v.trim() !== '') next[k] = v.trim();
    }
    navigate(hrefOf(next));
  };
  return html`<section>
    <h1>Invocations</h1>
    <form class="filters" onSubmit=${submit} aria-label="Filters">
      <label
        >Status
        <select name="status" value=${filters.status ?? ''}>
          <option value="">any</option>
          ${STATUSES.map((s) => html`<option value=${s} selected=${filters.status === s}>${s}</option>`)}
        </select>
      </label>
      <label>Service <input name="service" value=${filters.service ?? ''} /></label>
      <label>Handler <input name="handler" value=${filters.handler ?? ''} /></label>
      <label>Key <input name="key" value=${filters.key ?? ''} /></label>
      <label>Deployment <input name="deployment" value=${filters.deployment ?? ''} /></label>
      <label>Created from <input name="since" type="datetime-local" value=${filters.since ?? ''} /></label>
      <label>Created before <input name="until" type="datetime-local" value=${filters.until ?? ''} /></label>
      <label class="wide"
        >SQL <code>WHERE</code> <input name="where" value=${filters.where ?? ''} placeholder="retry_count > 3"
      /></label>
      <button type="submit">Filter</button>
    </form>
    <${Show} loaded=${loaded}>
      ${(rows: Row[]) => html`
        <div class="table-wrap">
          <table class="invocations">
            <caption class="sr-only">
              Invocations
            </caption>
            <thead>
              <tr>
                <th scope="col">Id</th>
                <th scope="col">Target</th>
                <th scope="col">Status</th>
                <th scope="col">Created</th>
                <th scope="col">Retries</th>
                <th scope="col">Last failure</th>
              </tr>
            </thead>
            <tbody>
              ${
                rows.length === 0
                  ? html`<tr>
                      <td colspan="6">No invocation matches.</td>
                    </tr>`
                  : null
              }
              ${rows.slice(0, PAGE).map(
                (r) =>
                  html`<tr>
                    <td>
                      <a href=${`#/invocation/${String(r.id)}`}><code>${text(r.id)}</code></a>
                    </td>
                    <td>${text(r.target)}</td>
                    <td><span class=${`status status-${String(r.status)}`}>${text(r.status)}</span></td>
                    <td>${text(r.created_at)}</td>
                    <td>${text(r.retry_count)}</td>
                    <td>
                      ${r.last_failure_error_code ? html`<code>${text(r.last_failure_error_code)}</code> ` : null}${r.last_failure ? text(r.last_failure).slice(0, 120) : ''}
                    </td>
                  </tr>`,
              )}
            </tbody>
          </table>
        </div>
        <nav class="pager" aria-label="Pages">
          ${page > 0 ? html`<a href=${hrefOf({ ...filters, page: String(page - 1) })}>← Newer</a>` : null}
          <span>Page ${page + 1}</span>
          ${rows.length > PAGE ? html`<a href=${hrefOf({ ...filters, page: String(page + 1) })}>Older →</a>` : null}
        </nav>
      `}
    <//>
  </section>`;
}
