import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import { query, type Row } from '../api.ts';
import { ErrorBox, messageOf, Show, text, useLoad } from '../ui.ts';

/** SQL over the introspection tables (`POST /query`), with the tables listed. */
export function Sql() {
  const [sql, setSql] = useState(
    'SELECT id, target, status, created_at FROM sys_invocation ORDER BY created_at DESC LIMIT 20',
  );
  const [result, setResult] = useState<{ rows: Row[] } | { error: string } | undefined>();
  const [running, setRunning] = useState(false);
  const [tables] = useLoad(
    () =>
      query(
        "SELECT table_name, count(*) AS columns FROM information_schema.columns WHERE table_name LIKE 'sys\\_%' OR table_name = 'state' GROUP BY table_name ORDER BY table_name",
      ),
    [],
  );
  const run = async (e: Event) => {
    e.preventDefault();
    setRunning(true);
    try {
      setResult({ rows: await query(sql) });
    } catch (err) {
      setResult({ error: messageOf(err) });
    } finally {
      setRunning(false);
    }
  };
  const columns =
    result !== undefined && 'rows' in result ? [...new Set(result.rows.flatMap((r) => Object.keys(r)))] : [];
  return html`<section>
    <h1>SQL</h1>
    <${Show} loaded=${tables}>
      ${(rows: Row[]) =>
        html`<p class="tables" aria-label="Tables">
          Tables: ${rows.map((r, i) => html`${i === 0 ? '' : ', '}<code>${text(r.table_name)}</code>`)}
        </p>`}
    <//>
    <form onSubmit=${run} class="sql">
      <label for="sql-text">Statement</label>
      <textarea
        id="sql-text"
        rows="5"
        value=${sql}
        onInput=${(e: Event) => setSql((e.target as HTMLTextAreaElement).value)}
      ></textarea>
      <button type="submit" disabled=${running}>Run</button>
    </form>
    ${result !== undefined && 'error' in result ? html`<${ErrorBox} message=${result.error} />` : null}
    ${
      result !== undefined && 'rows' in result
        ? html`<p>${result.rows.length} rows</p>
            <div class="table-wrap">
              <table class="result">
                <caption class="sr-only">
                  Result
                </caption>
                <thead>
                  <tr>
                    ${columns.map((c) => html`<th scope="col">${c}</th>`)}
                  </tr>
                </thead>
                <tbody>
                  ${result.rows.map(
                    (r) =>
                      html`<tr>
                        ${columns.map((c) => html`<td>${text(r[c])}</td>`)}
                      </tr>`,
                  )}
                </tbody>
              </table>
            </div>`
        : null
    }
  </section>`;
}
