import { html } from 'htm/preact';
import { api, query } from '../api.ts';
import { Show, text, useLoad } from '../ui.ts';

interface Service {
  name: string;
  ty: string;
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

/** Services and their handlers, deployments, and invocations by status. */
export function Overview() {
  const [loaded] = useLoad(
    async () => {
      const [services, deployments, counts] = await Promise.all([
        api<{ services: Service[] }>('GET', '/services'),
        api<{ deployments: Deployment[] }>('GET', '/deployments'),
        query('SELECT status, count(*) AS n FROM sys_invocation GROUP BY status ORDER BY status'),
      ]);
      return { services: services.services, deployments: deployments.deployments, counts };
    },
    [],
    5000,
  );
  return html`<section>
    <h1>Overview</h1>
    <${Show} loaded=${loaded}>
      ${(v: { services: Service[]; deployments: Deployment[]; counts: { status: string; n: number }[] }) => html`
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
                </tr>`,
            )}
          </tbody>
        </table>
        <h2>Deployments</h2>
        <table>
          <caption class="sr-only">
            Deployments
          </caption>
          <thead>
            <tr>
              <th scope="col">Id</th>
              <th scope="col">Endpoint</th>
              <th scope="col">Services</th>
            </tr>
          </thead>
          <tbody>
            ${v.deployments.map(
              (d) =>
                html`<tr>
                  <td><code>${d.id}</code></td>
                  <td>${d.uri ?? d.arn ?? '—'}</td>
                  <td>${d.services.map((s) => `${s.name} (revision ${s.revision})`).join(', ')}</td>
                </tr>`,
            )}
          </tbody>
        </table>
      `}
    <//>
  </section>`;
}
