import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import { api } from '../api.ts';
import { ErrorBox, messageOf } from '../ui.ts';

export interface ServiceSettings {
  name: string;
  ty: string;
  public: boolean;
  idempotency_retention?: string | null;
  workflow_completion_retention?: string | null;
  journal_retention?: string | null;
  inactivity_timeout?: string | null;
  abort_timeout?: string | null;
}

const DURATIONS = [
  ['idempotency_retention', 'Idempotency retention'],
  ['journal_retention', 'Journal retention'],
  ['inactivity_timeout', 'Inactivity timeout'],
  ['abort_timeout', 'Abort timeout'],
] as const;

/**
 * A service's settings (`PATCH /services/{service}`): public, retentions and timeouts, as durations the admin API reads
 * (`1d`, `10m`, `500ms`). An empty field is left as it is; the API's refusal is shown as it words it.
 */
export function ServiceSettingsForm({ service, onDone }: { service: ServiceSettings; onDone: () => void }) {
  const [outcome, setOutcome] = useState<{ ok: boolean; text: string } | undefined>();
  const submit = async (e: Event) => {
    e.preventDefault();
    const data = new FormData(e.target as HTMLFormElement);
    const body: Record<string, unknown> = { public: data.get('public') === 'on' };
    const fields = [
      ...DURATIONS.map(([k]) => k),
      ...(service.ty === 'Workflow' ? ['workflow_completion_retention'] : []),
    ];
    for (const k of fields) {
      const v = data.get(k);
      if (typeof v === 'string' && v.trim() !== '') body[k] = v.trim();
    }
    if (!window.confirm(`Change the settings of ${service.name}?`)) return;
    try {
      await api('PATCH', `/services/${encodeURIComponent(service.name)}`, body);
      setOutcome({ ok: true, text: `${service.name}: settings changed` });
      onDone();
    } catch (err) {
      setOutcome({ ok: false, text: `Change refused: ${messageOf(err)}` });
    }
  };
  return html`<form class="filters" onSubmit=${submit} aria-label=${`Settings of ${service.name}`}>
      <label>Public <input type="checkbox" name="public" checked=${service.public} /></label>
      ${DURATIONS.map(
        ([k, label]) => html`<label>${label} <input name=${k} placeholder=${service[k] ?? ''} /></label>`,
      )}
      ${
        service.ty === 'Workflow'
          ? html`<label
              >Workflow completion retention
              <input name="workflow_completion_retention" placeholder=${service.workflow_completion_retention ?? ''}
            /></label>`
          : null
      }
      <button type="submit">Save settings</button>
    </form>
    ${
      outcome === undefined
        ? null
        : outcome.ok
          ? html`<p class="notice" role="status">${outcome.text}</p>`
          : html`<${ErrorBox} message=${outcome.text} />`
    }`;
}
