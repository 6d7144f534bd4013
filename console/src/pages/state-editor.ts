import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import { api, type Row } from '../api.ts';
import { ErrorBox, messageOf, text } from '../ui.ts';

/**
 * The state of one virtual-object or workflow key, editable as text (`POST /services/{service}/state` replaces the
 * whole state: every key is sent, as UTF-8 bytes). A key whose value is not UTF-8 cannot be edited here.
 */
export function StateEditor(props: { service: string; objectKey: string; rows: Row[]; onDone: () => void }) {
  const [values, setValues] = useState<Record<string, string>>(() =>
    Object.fromEntries(props.rows.map((r) => [text(r.key), r.value_utf8 === null ? '' : text(r.value_utf8)])),
  );
  const [outcome, setOutcome] = useState<{ ok: boolean; text: string } | undefined>();
  const binary = props.rows.some((r) => r.value_utf8 === null);
  const save = async (e: Event) => {
    e.preventDefault();
    if (!window.confirm(`Replace the state of ${props.service}/${props.objectKey}?`)) return;
    const encoder = new TextEncoder();
    const newState = Object.fromEntries(Object.entries(values).map(([k, v]) => [k, [...encoder.encode(v)]]));
    try {
      await api('POST', `/services/${encodeURIComponent(props.service)}/state`, {
        object_key: props.objectKey,
        new_state: newState,
      });
      setOutcome({ ok: true, text: 'State replaced' });
      props.onDone();
    } catch (err) {
      setOutcome({ ok: false, text: `State change refused: ${messageOf(err)}` });
    }
  };
  return html`<form onSubmit=${save} aria-label="State">
      <div class="table-wrap">
        <table>
          <thead>
            <tr>
              <th scope="col">Key</th>
              <th scope="col">Value</th>
            </tr>
          </thead>
          <tbody>
            ${props.rows.map(
              (r) =>
                html`<tr>
                  <td><code>${text(r.key)}</code></td>
                  <td>
                    ${
                      r.value_utf8 === null
                        ? `${text(r.value_length)} bytes (not UTF-8)`
                        : html`<input
                            aria-label=${`Value of ${text(r.key)}`}
                            value=${values[text(r.key)] ?? ''}
                            onInput=${(e: Event) => setValues({ ...values, [text(r.key)]: (e.target as HTMLInputElement).value })}
                          />`
                    }
                  </td>
                </tr>`,
            )}
          </tbody>
        </table>
      </div>
      ${binary ? html`<p>Values that are not UTF-8 cannot be edited here (the restate CLI can).</p>` : html`<button type="submit">Save state</button>`}
    </form>
    ${
      outcome === undefined
        ? null
        : outcome.ok
          ? html`<p class="notice" role="status">${outcome.text}</p>`
          : html`<${ErrorBox} message=${outcome.text} />`
    }`;
}
