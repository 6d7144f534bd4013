import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import { api, query } from '../api.ts';
import { ErrorBox, messageOf, Show, text, useLoad } from '../ui.ts';
import { ServiceSettingsForm, type ServiceSettings } from './service-settings.ts';

interface Service extends ServiceSettings {
  deployment_id: string;
  revision: number;
  handlers: { name: string; ty?: string }[];
}
interface Deployment {
  id: string;
  uri?: string;
  arn?: string;
  services: { name: string; revision: number }[];
}

interface Subscription {
  id: string;
  source: string;
  sink: string;
}
interface SubscriptionStatus {
  ready: boolean;
  reason: string | null;
  lag: number | null;
}
interface Node {
  name: string;
  alive: boolean;
  leaving: boolean;
  leader_of: number[];
}
interface Overview {
  services: Service[];
  deployments: Deployment[];
  counts: { status: string; n: number }[];
  nodes: Node[];
  subscriptions: { sub: Subscription; status: SubscriptionStatus | undefined }[];
  pinned: Record<string, number>;
}

/** Current (some service runs on it), draining (superseded, with invocations still pinned to it) or superseded. */
function deploymentState(d: Deployment, v: Overview): string {
  if (v.services.some((s) => s.deployment_id === d.id)) return 'current';
  const n = v.pinned[d.id] ?? 0;
  return n > 0 ? `draining (${n} unfinished)` : 'superseded';
}

/** Registers a deployment (`POST /deployments`): the API's refusal is shown as it words it. */
function Register({ onDone }: { onDone: () => void }) {
  const [outcome, setOutcome] = useState<{ ok: boolean; text: string } | undefined>();
  const submit = async (e: Event) => {
    e.preventDefault();
    const field = new FormData(e.target as HTMLFormElement).get('uri');
    const uri = typeof field === 'string' ? field.trim() : '';
    try {
      const body = uri.startsWith('arn:') ? { arn: uri } : { uri };
      const res = await api<{ id: string }>('POST', '/deployments', body);
      setOutcome({ ok: true, text: `Registered ${res.id}` });
      onDone();
    } catch (err) {
      setOutcome({ ok: false, text: `Registration refused: ${messageOf(err)}` });
    }
  };
  return html`<form class="filters" onSubmit=${submit} aria-label="Register a deployment">
      <label class="wide"
        >Deployment URI or Lambda ARN <input name="uri" required placeholder="http://127.0.0.1:9080"
      /></label>
      <button type="submit">Register</button>
    </form>
    ${
      outcome === undefined
        ? null
        : outcome.ok
          ? html`<p class="notice" role="status">${outcome.text}</p>`
          : html`<${ErrorBox} message=${outcome.text} />`
    }`;
}

/** Services and their handlers, deployments, invocations by status, the nodes' partitions, Kafka subscriptions. */
export function Overview() {
  const [editing, setEditing] = useState<string | undefined>();
  const [loaded, reload] = useLoad(
    async (): Promise<Overview> => {
      const [services, deployments, groups, health, subs] = await Promise.all([
        api<{ services: Service[] }>('GET', '/services'),
        api<{ deployments: Deployment[] }>('GET', '/deployments'),
        // One pass over the invocations: counts by status, and the unfinished ones per pinned deployment (a
        // superseded deployment with some is draining).
        query(
          'SELECT status, pinned_deployment_id AS id, count(*) AS n FROM sys_invocation GROUP BY status, pinned_deployment_id',
        ),
        api<{ nodes: Node[] }>('GET', '/cluster-health').catch(() => ({ nodes: [] as Node[] })),
        api<{ subscriptions: Subscription[] }>('GET', '/subscriptions'),
      ]);
      const byStatus = new Map<string, number>();
      const pinned: Record<string, number> = {};
      for (const g of groups) {
        const status = String(g.status);
        byStatus.set(status, (byStatus.get(status) ?? 0) + Number(g.n));
        if (status !== 'completed' && typeof g.id === 'string') pinned[g.id] = (pinned[g.id] ?? 0) + Number(g.n);
      }
      const subscriptions = await Promise.all(
        subs.subscriptions.map(async (sub) => ({
          sub,
          status: await api<SubscriptionStatus>('GET', `/subscriptions/${sub.id}/status`).catch(() => undefined),
        })),
      );
      return {
        services: services.services,
        deployments: deployments.deployments,
        counts: [...byStatus].sort(([a], [b]) => a.localeCompare(b)).map(([status, n]) => ({ status, n })),
        nodes: health.nodes,
        subscriptions,
        pinned,
      };
    },
    [],
    5000,
  );
  return html`<section>
    <h1>Overview</h1>
    <${Show} loaded=${loaded}>
      ${(v: Overview) => html`
        <h2>Invocations by status</h2>
        <ul class="counts" aria-label="Invocations by status">
          ${v.counts.length === 0 ? html`<li>No invocations yet.</li>` : null}
          ${v.counts.map(
            (c) =>
              html`<li>
                <a href=${`#/invocations?status=${encodeURIComponent(c.status)}`}>${c.status}</a>:
                <strong>${text(c.n)}</strong>
              </li>`,
          )}
        </ul>
        <h2>Services</h2>
        <div class="table-wrap">
          <table>
            <caption class="sr-only">
              Services
            </caption>
            <thead>
              <tr>
                <th scope="col">Service</th>
                <th scope="col">Type</th>
                <th scope="col">Handlers</th>
                <th scope="col">Deployment</th>
                <th scope="col"><span class="sr-only">Settings</span></th>
              </tr>
            </thead>
            <tbody>
              ${v.services.map(
                (s) =>
                  html`<tr>
                    <td>${s.name}</td>
                    <td>${s.ty}</td>
                    <td>${s.handlers.map((h) => (h.ty === undefined ? h.name : `${h.name} (${h.ty})`)).join(', ')}</td>
                    <td><code>${s.deployment_id}</code></td>
                    <td>
                      <button
                        type="button"
                        class="small"
                        onClick=${() => setEditing(editing === s.name ? undefined : s.name)}
                      >
                        ${editing === s.name ? 'Close' : `Edit ${s.name}`}
                      </button>
                    </td>
                  </tr>`,
              )}
            </tbody>
          </table>
        </div>
        ${
          editing === undefined
            ? null
            : (() => {
                const svc = v.services.find((x) => x.name === editing);
                return svc === undefined ? null : html`<${ServiceSettingsForm} service=${svc} onDone=${reload} />`;
              })()
        }
        <h2>Deployments</h2>
        <div class="table-wrap">
          <table>
            <caption class="sr-only">
              Deployments
            </caption>
            <thead>
              <tr>
                <th scope="col">Id</th>
                <th scope="col">Endpoint</th>
                <th scope="col">Services</th>
                <th scope="col">State</th>
              </tr>
            </thead>
            <tbody>
              ${v.deployments.map(
                (d) =>
                  html`<tr>
                    <td><code>${d.id}</code></td>
                    <td>${d.uri ?? d.arn ?? '—'}</td>
                    <td>${d.services.map((s) => `${s.name} (revision ${s.revision})`).join(', ')}</td>
                    <td>${deploymentState(d, v)}</td>
                  </tr>`,
              )}
            </tbody>
          </table>
        </div>
        <${Register} onDone=${reload} />
        <h2>Nodes and partitions</h2>
        <div class="table-wrap">
          <table>
            <caption class="sr-only">
              Nodes
            </caption>
            <thead>
              <tr>
                <th scope="col">Node</th>
                <th scope="col">State</th>
                <th scope="col">Partitions it leads</th>
              </tr>
            </thead>
            <tbody>
              ${v.nodes.map(
                (n) =>
                  html`<tr>
                    <td>${n.name}</td>
                    <td>${n.alive ? (n.leaving ? 'leaving' : 'alive') : 'gone'}</td>
                    <td>${n.leader_of.length} (${n.leader_of.join(', ')})</td>
                  </tr>`,
              )}
            </tbody>
          </table>
        </div>
        <h2>Kafka subscriptions</h2>
        ${
          v.subscriptions.length === 0
            ? html`<p>No subscriptions.</p>`
            : html`<div class="table-wrap">
                <table>
                  <caption class="sr-only">
                    Kafka subscriptions
                  </caption>
                  <thead>
                    <tr>
                      <th scope="col">Id</th>
                      <th scope="col">Source</th>
                      <th scope="col">Sink</th>
                      <th scope="col">Consuming</th>
                      <th scope="col">Lag</th>
                    </tr>
                  </thead>
                  <tbody>
                    ${v.subscriptions.map(
                      ({ sub, status }) =>
                        html`<tr>
                          <td><code>${sub.id}</code></td>
                          <td>${sub.source}</td>
                          <td>${sub.sink}</td>
                          <td>${status === undefined ? '—' : status.ready ? 'yes' : `no: ${status.reason ?? ''}`}</td>
                          <td>${text(status?.lag)}</td>
                        </tr>`,
                    )}
                  </tbody>
                </table>
              </div>`
        }
      `}
    <//>
  </section>`;
}
