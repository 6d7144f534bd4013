/**
 * How the console does with 100 000 invocations (console/README.md records the figures): a runtime with that many
 * completed invocations (made through the ingress by autocannon-like concurrent sends), then in headless chromium the
 * time to first contentful paint of the invocation list, of the overview, and to open one invocation (and to have its
 * log lines and trace, looked up among every invocation's).
 *
 *   npx tsx console/test/perf.ts [count]
 */
import * as restate from '@restatedev/restate-sdk';
import '../../test/support/polyfill.ts';
import { startTestRuntime } from '../../test/integration/support/runtime.ts';
import { startEmbeddedPostgres } from '../../test/support/postgres-server.ts';
import { startEndpoint } from '../../test/support/sdk-endpoint.ts';
import { launch } from './browser.ts';

const COUNT = Number(process.argv[2] ?? '100000');

const noop = restate.service({
  name: 'Noop',
  handlers: { run: (_ctx: restate.Context, n: number) => Promise.resolve(n) },
});

const pg = await startEmbeddedPostgres();
const dbUrl = pg.adminUrl;
const runtime = await startTestRuntime(dbUrl, {});
const endpoint = await startEndpoint({ services: [noop], transport: 'h2' });
await fetch(`${runtime.adminUrl}/deployments`, {
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ uri: endpoint.url }),
});
const started = Date.now();
let next = 0;
await Promise.all(
  Array.from({ length: 64 }, async () => {
    while (next < COUNT) {
      const n = next++;
      const res = await fetch(`${runtime.ingressUrl}/Noop/run`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: String(n),
      });
      await res.arrayBuffer();
    }
  }),
);
console.log(`${COUNT} invocations in ${((Date.now() - started) / 1000).toFixed(1)} s`);

const browser = await launch();
const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
async function timed(label: string, url: string, ready: () => Promise<unknown>): Promise<void> {
  // A fresh load each time (the console's routes are hash changes, which would not load anything).
  await page.goto('about:blank');
  const t0 = Date.now();
  await page.goto(url);
  await ready();
  const fcp = await page.evaluate(() => performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? null);
  console.log(
    `${label}: data shown after ${Date.now() - t0} ms (first contentful paint ${fcp === null ? '—' : `${Math.round(fcp)} ms`})`,
  );
}
for (let i = 0; i < 3; i++) {
  await timed('overview', `${runtime.adminUrl}/ui/#/`, () =>
    page.getByLabel('Invocations by status').getByText('completed').waitFor(),
  );
  await timed('invocations', `${runtime.adminUrl}/ui/#/invocations`, () =>
    page.locator('table.invocations tbody tr').nth(49).waitFor(),
  );
  await timed(
    'invocations, status filter, page 11',
    `${runtime.adminUrl}/ui/#/invocations?status=completed&page=10`,
    () => page.getByText('Page 11').waitFor(),
  );
  await page.locator('table.invocations tbody tr').nth(49).waitFor();
  const first = await page.locator('table.invocations tbody tr a').first().getAttribute('href');
  await timed('one invocation', `${runtime.adminUrl}/ui/${first ?? ''}`, () =>
    page.getByLabel('Journal').locator('li').nth(1).waitFor(),
  );
  // Its log lines and trace, from the observability store (with every invocation's lines and spans in it).
  await timed('one invocation with its logs and trace', `${runtime.adminUrl}/ui/${first ?? ''}`, () =>
    Promise.all([
      page.getByRole('table', { name: 'Log lines' }).locator('tbody tr').nth(2).waitFor(),
      page.getByRole('list', { name: 'Spans' }).locator('li.span').nth(3).waitFor(),
    ]),
  );
}
await browser.close();
await runtime.stop();
await endpoint.close();
await pg.stop();
