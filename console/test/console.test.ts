import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as restate from '@restatedev/restate-sdk';
import { AxeBuilder } from '@axe-core/playwright';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jwks, mint, newKey, nowSeconds } from '../../test/integration/auth/support.ts';
import { call, startTestRuntime, type TestRuntime } from '../../test/integration/support/runtime.ts';
import { createTestDatabase, type TestDatabase } from '../../test/support/postgres.ts';
import { registerEndpoint } from '../../test/support/registration.ts';
import { startEndpoint, type SdkEndpoint } from '../../test/support/sdk-endpoint.ts';
import { launch, SCREENSHOTS } from './browser.ts';

/**
 * The web console in a real browser (Debian's chromium, headless) against a real runtime and SDK service: find a
 * stuck invocation by filter, read its retry error, open its timeline, fix the service, resume it and watch it
 * complete; a refused action shows the API's message; in managed mode the console asks for a token and shows no data
 * before it has one.
 */

let broken = true;
const cart = restate.object({
  name: 'Cart',
  handlers: {
    add: async (ctx: restate.ObjectContext, item: string): Promise<string[]> => {
      const items = [...((await ctx.get<string[]>('items')) ?? []), item];
      ctx.set('items', items);
      return items;
    },
  },
});

const extra = restate.service({ name: 'Extra', handlers: { hi: (_ctx: restate.Context) => Promise.resolve('hi') } });

const payments = restate.service({
  name: 'Payments',
  handlers: {
    charge: async (ctx: restate.Context, amount: number): Promise<string> => {
      const receipt = await ctx.run('reserve', () => `reserved ${amount}`);
      if (broken) throw new Error('payment gateway down');
      return `${receipt}, charged`;
    },
  },
});

/** Presses Tab until the focused element `el` is the one `wanted` (a JavaScript expression of `el`) describes. */
async function tabTo(page: Page, wanted: string): Promise<void> {
  for (let i = 0; i < 80; i++) {
    await page.keyboard.press('Tab');
    if (await page.evaluate(`((el) => ${wanted})(document.activeElement)`)) return;
  }
  throw new Error(`Tab never reached the element (${wanted})`);
}

/** Accepts the confirmation of every action. */
function dialogsAccepted(page: Page): void {
  page.on('dialog', (d) => void d.accept());
}

describe('the console (dev mode)', () => {
  let db: TestDatabase;
  let runtime: TestRuntime;
  let endpoint: SdkEndpoint;
  let second: SdkEndpoint;
  let browser: Browser;

  beforeAll(async () => {
    db = await createTestDatabase();
    runtime = await startTestRuntime(db.url, {
      RATCHET_RETRY_INITIAL_INTERVAL: '20ms',
      RATCHET_RETRY_MAX_ATTEMPTS: '2',
      RATCHET_RETRY_ON_MAX_ATTEMPTS: 'pause',
    });
    endpoint = await startEndpoint({ services: [payments, cart], transport: 'h2' });
    await registerEndpoint(runtime, endpoint);
    second = await startEndpoint({ services: [extra], transport: 'h2' });
    browser = await launch();
  });

  afterAll(async () => {
    await browser?.close();
    await runtime?.stop();
    await endpoint?.close();
    await second?.close();
    await db?.drop();
  });

  it('finds a stuck invocation, shows why, and resumes it once the service is fixed', async () => {
    broken = true;
    const sent = await call(runtime.ingressUrl, '/Payments/charge/send', 42);
    expect(sent.status).toBe(202);
    const id = (sent.json as { invocationId: string }).invocationId;

    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    dialogsAccepted(page);
    await page.goto(`${runtime.adminUrl}/ui/`);
    // Overview: the service, its deployment, the counts (refreshed until the invocation is paused).
    await expect.poll(() => page.locator('table').first().textContent(), { timeout: 15_000 }).toContain('Payments');
    await expect
      .poll(() => page.getByLabel('Invocations by status').textContent(), { timeout: 15_000 })
      .toContain('paused');
    await page.screenshot({ path: `${SCREENSHOTS}overview.png`, fullPage: true });

    // The list, filtered by status through the form.
    await page.getByRole('link', { name: 'Invocations', exact: true }).click();
    await page.locator('select[name="status"]').selectOption('paused');
    await page.getByLabel('Service').fill('Payments');
    await page.getByRole('button', { name: 'Filter' }).click();
    await expect.poll(() => page.locator('table.invocations tbody').textContent(), { timeout: 15_000 }).toContain(id);
    await page.screenshot({ path: `${SCREENSHOTS}invocations.png`, fullPage: true });

    // The detail: status, the retry error, the journal.
    await page.getByRole('link', { name: id }).click();
    await expect.poll(() => page.getByTestId('status').textContent(), { timeout: 15_000 }).toBe('paused');
    expect(await page.getByTestId('last-failure').textContent()).toContain('payment gateway down');
    const journal = await page.getByLabel('Journal').textContent();
    expect(journal).toContain('Command: Input');
    expect(journal).toContain('Command: Run');
    expect(journal).toContain('reserve');
    // Each command with the completion it waits for and the entry that resolved it, each notification with its result.
    expect(journal).toMatch(/completion 1, resolved by entry 2: "reserved 42"/);
    expect(journal).toContain('completion 1: "reserved 42"');
    // Why it is paused, in its own words (its `paused` line), its log lines and its trace, all on the same page.
    await expect
      .poll(() => page.getByTestId('pause-reason').textContent(), { timeout: 15_000 })
      .toMatch(/Paused: \[RT0007\] invocation paused after a failure: .*payment gateway down/);
    await expect
      .poll(() => page.getByRole('table', { name: 'Log lines' }).textContent(), { timeout: 15_000 })
      .toContain('invocation paused after a failure');
    const logs = await page.getByRole('table', { name: 'Log lines' }).textContent();
    expect(logs).toContain('invocation accepted');
    expect(logs).toMatch(/invocation attempt failed; retrying in \d+ ms: .*payment gateway down/);
    await expect
      .poll(() => page.getByRole('list', { name: 'Spans' }).textContent(), { timeout: 15_000 })
      .toContain('invocation-attempt Payments/charge');
    const spans = await page.getByRole('list', { name: 'Spans' }).textContent();
    expect(spans).toContain('ingress Payments/charge');
    expect(spans).toContain('invocation-start Payments/charge');
    expect(spans).toContain('payment gateway down');
    await page.screenshot({ path: `${SCREENSHOTS}invocation-paused.png`, fullPage: true });

    // Fixed: resume, and it completes.
    broken = false;
    await page.getByRole('button', { name: 'Resume' }).click();
    await expect.poll(() => page.getByTestId('status').textContent(), { timeout: 20_000 }).toBe('completed');
    expect(await page.getByTestId('pause-reason').count()).toBe(0);
    await expect
      .poll(() => page.getByRole('list', { name: 'Spans' }).textContent(), { timeout: 15_000 })
      .toContain('invocation-end Payments/charge');
    await expect
      .poll(() => page.getByRole('table', { name: 'Log lines' }).textContent(), { timeout: 15_000 })
      .toContain('invocation resumed by the admin API');
    await page.screenshot({ path: `${SCREENSHOTS}invocation-completed.png`, fullPage: true });

    // Restart as new from an entry of the timeline, on the latest deployment: a new invocation, which completes.
    await page.getByLabel('Deployment for resume and restart').selectOption('Latest');
    await page.getByRole('button', { name: 'Restart as new from here' }).first().click();
    await expect.poll(() => page.url(), { timeout: 10_000 }).not.toContain(id);
    await expect.poll(() => page.getByTestId('status').textContent(), { timeout: 20_000 }).toBe('completed');
    expect(await page.getByLabel('Journal').textContent()).toContain('reserve');

    // A refused action shows the API's message.
    await page.getByRole('button', { name: 'Resume' }).click();
    await expect
      .poll(() => page.getByRole('alert').textContent(), { timeout: 10_000 })
      .toMatch(/Resume refused: 4\d\d: .+/);
    await page.close();
  });

  it("shows an object's state, and runs SQL with the tables listed", async () => {
    const res = await call(runtime.ingressUrl, '/Cart/alice/add', 'book');
    expect(res.status).toBe(200);
    const id = res.headers.get('x-restate-id')!;
    const page = await browser.newPage();
    await page.goto(`${runtime.adminUrl}/ui/#/invocation/${id}`);
    await expect.poll(() => page.getByLabel('Value of items').inputValue(), { timeout: 15_000 }).toBe('["book"]');
    dialogsAccepted(page);
    await page.getByLabel('Value of items').fill('["book","pen"]');
    await page.getByRole('button', { name: 'Save state' }).click();
    await expect.poll(() => page.getByRole('status').textContent(), { timeout: 10_000 }).toBe('State replaced');
    const after = await call(runtime.ingressUrl, '/Cart/alice/add', 'cup');
    expect(after.json).toEqual(['book', 'pen', 'cup']);

    await page.getByRole('link', { name: 'SQL' }).click();
    await expect.poll(() => page.getByLabel('Tables').textContent(), { timeout: 15_000 }).toContain('sys_invocation');
    await page.getByLabel('Statement').fill(`SELECT target, status FROM sys_invocation WHERE id = '${id}'`);
    await page.getByRole('button', { name: 'Run' }).click();
    await expect
      .poll(() => page.locator('table.result').textContent(), { timeout: 10_000 })
      .toContain('Cart/alice/add');
    await page.screenshot({ path: `${SCREENSHOTS}sql.png`, fullPage: true });
    await page.getByLabel('Statement').fill('SELECT nope FROM sys_invocation');
    await page.getByRole('button', { name: 'Run' }).click();
    await expect.poll(() => page.getByRole('alert').textContent(), { timeout: 10_000 }).toMatch(/^400: .*nope/);
    await page.close();
  });

  it('registers a deployment, shows a refused registration in the API’s words, and lists the nodes', async () => {
    const page = await browser.newPage();
    await page.goto(`${runtime.adminUrl}/ui/`);
    await page.getByLabel('Deployment URI or Lambda ARN').fill('http://127.0.0.1:1');
    await page.getByRole('button', { name: 'Register' }).click();
    await expect
      .poll(() => page.getByRole('alert').textContent(), { timeout: 20_000 })
      .toMatch(/Registration refused: \d{3}: .*META0003/);
    await page.getByLabel('Deployment URI or Lambda ARN').fill(second.url);
    await page.getByRole('button', { name: 'Register' }).click();
    await expect.poll(() => page.getByRole('status').textContent(), { timeout: 20_000 }).toMatch(/^Registered dp_/);
    await expect.poll(() => page.locator('table').first().textContent(), { timeout: 15_000 }).toContain('Extra');
    expect(await page.getByRole('table', { name: 'Nodes' }).textContent()).toContain('alive');

    // A service's settings: a bad duration is refused in the API's words, a good one is applied.
    dialogsAccepted(page);
    await page.getByRole('button', { name: 'Edit Payments' }).click();
    const form = page.getByRole('form', { name: 'Settings of Payments' });
    await form.getByLabel('Journal retention').fill('forever');
    await form.getByRole('button', { name: 'Save settings' }).click();
    await expect.poll(() => page.getByText(/^Change refused: 4\d\d: /).count(), { timeout: 10_000 }).toBe(1);
    await form.getByLabel('Journal retention').fill('2h');
    await form.getByRole('button', { name: 'Save settings' }).click();
    await expect.poll(() => page.getByText('Payments: settings changed').count(), { timeout: 10_000 }).toBe(1);
    const svc = (await (await fetch(`${runtime.adminUrl}/services/Payments`)).json()) as { journal_retention: string };
    expect(svc.journal_retention).toBe('2h');

    // A new deployment of Payments: the old one drains while an invocation pinned to it is unfinished.
    broken = true;
    const stuck = await call(runtime.ingressUrl, '/Payments/charge/send', 7);
    expect(stuck.status).toBe(202);
    const old = (await (await fetch(`${runtime.adminUrl}/services/Payments`)).json()) as { deployment_id: string };
    const third = await startEndpoint({ services: [payments, cart], transport: 'h2' });
    try {
      await registerEndpoint(runtime, third);
      await page.reload();
      const deployments = page.getByRole('table', { name: 'Deployments' });
      await expect
        .poll(async () => (await deployments.locator('tr', { hasText: old.deployment_id }).textContent()) ?? '', {
          timeout: 15_000,
        })
        .toMatch(/draining \(\d+ unfinished\)/);
      expect(await deployments.textContent()).toContain('current');
      await fetch(`${runtime.adminUrl}/invocations/${(stuck.json as { invocationId: string }).invocationId}/kill`, {
        method: 'PATCH',
      });
    } finally {
      broken = false;
      await third.close();
    }
    await page.close();
  });

  it('passes axe (WCAG 2.1 A and AA) on every page, works with the keyboard alone, and fits a phone', async () => {
    // Extra's deployment is still up (the previous test took Cart's away).
    const res = await call(runtime.ingressUrl, '/Extra/hi');
    expect(res.status).toBe(200);
    const id = res.headers.get('x-restate-id')!;
    // axe needs a page of its own context (it opens a blank page in it to assemble its results).
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    const pages: [string, () => Promise<unknown>][] = [
      [
        'overview',
        () => expect.poll(() => page.getByRole('table', { name: 'Nodes' }).count(), { timeout: 15_000 }).toBe(1),
      ],
      [
        'invocations',
        () =>
          expect.poll(() => page.locator('table.invocations tbody tr').count(), { timeout: 15_000 }).toBeGreaterThan(0),
      ],
      [
        `invocation/${id}`,
        () => expect.poll(() => page.getByRole('list', { name: 'Spans' }).count(), { timeout: 15_000 }).toBe(1),
      ],
      ['sql', () => expect.poll(() => page.getByLabel('Tables').textContent(), { timeout: 15_000 }).toContain('sys_')],
    ];
    for (const [route, ready] of pages) {
      await page.goto(`${runtime.adminUrl}/ui/#/${route === 'overview' ? '' : route}`);
      await ready();
      const result = await new AxeBuilder({ page }).withTags(['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']).analyze();
      const violations = result.violations.map(
        (v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`,
      );
      expect(violations, route).toEqual([]);
    }

    // The keyboard alone: from the top of the page to the list, to an invocation, to its actions.
    await page.goto(`${runtime.adminUrl}/ui/`);
    await expect.poll(() => page.getByRole('table', { name: 'Nodes' }).count(), { timeout: 15_000 }).toBe(1);
    await tabTo(page, "el.tagName === 'A' && el.textContent === 'Invocations'");
    await page.keyboard.press('Enter');
    await expect.poll(() => page.url()).toContain('#/invocations');
    await expect.poll(() => page.locator('table.invocations tbody tr').count(), { timeout: 15_000 }).toBeGreaterThan(0);
    await tabTo(page, "el.tagName === 'A' && el.textContent.startsWith('inv_')");
    await page.keyboard.press('Enter');
    await expect.poll(() => page.url()).toContain('#/invocation/inv_');
    await expect.poll(() => page.getByTestId('status').count(), { timeout: 15_000 }).toBe(1);
    await tabTo(page, "el.tagName === 'BUTTON' && el.textContent === 'Cancel'");
    // What has the focus is shown.
    const outline = await page.evaluate('getComputedStyle(document.activeElement).outlineStyle');
    expect(outline).toBe('solid');

    // A phone: nothing wider than the screen (tables scroll inside their box).
    await page.setViewportSize({ width: 390, height: 844 });
    for (const route of ['', 'invocations', `invocation/${id}`, 'sql']) {
      await page.goto(`${runtime.adminUrl}/ui/#/${route}`);
      await page.waitForTimeout(500);
      const overflow = await page.evaluate('document.documentElement.scrollWidth - window.innerWidth');
      // What sticks out, to say so when something does.
      const wide = await page.evaluate(
        `[...document.querySelectorAll('body *')].filter((e) => e.getBoundingClientRect().right > window.innerWidth + 1)
          .map((e) => e.tagName.toLowerCase() + (e.className ? '.' + e.className : '')).slice(0, 8).join(' ')`,
      );
      expect(overflow, `${route}: ${String(wide)}`).toBeLessThanOrEqual(0);
    }
    await page.screenshot({ path: `${SCREENSHOTS}phone-invocation.png`, fullPage: true });
    await context.close();
  }, 120_000);

  it('serves its files without a CDN and with a strict content security policy', async () => {
    const res = await fetch(`${runtime.adminUrl}/ui/`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-security-policy')).toContain("script-src 'self'");
    const html = await res.text();
    expect(html).not.toMatch(/https?:\/\//);
    const js = await fetch(`${runtime.adminUrl}/ui/app.js`);
    expect(js.headers.get('content-type')).toContain('javascript');
    expect((await fetch(`${runtime.adminUrl}/ui/nothing.js`)).status).toBe(404);
    const doc = await fetch(`${runtime.adminUrl}/ui/errors/RT0024`);
    expect(await doc.text()).toContain('# RT0024');
  });
});

describe('the console (managed mode)', () => {
  const key = newKey('ed25519');
  let dir: string;
  let db: TestDatabase;
  let runtime: TestRuntime;
  let browser: Browser;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ratchet-console-'));
    writeFileSync(join(dir, 'keys.json'), jwks({ key, kid: 'k1' }));
    db = await createTestDatabase();
    runtime = await startTestRuntime(db.url, {
      RATCHET_CLUSTER_NAME: 'console',
      RATCHET_AUTH_KEYS_FILE: join(dir, 'keys.json'),
    });
    browser = await launch();
  });

  afterAll(async () => {
    await browser?.close();
    await runtime?.stop();
    await db?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('asks for a token, shows no data without one, and works with one', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    const apiCalls: string[] = [];
    page.on('response', (r) => {
      if (!r.url().includes('/ui')) apiCalls.push(`${r.status()} ${new URL(r.url()).pathname}`);
    });
    await page.goto(`${runtime.adminUrl}/ui/`);
    await expect.poll(() => page.getByRole('button', { name: 'Sign in' }).count(), { timeout: 15_000 }).toBe(1);
    expect(await page.locator('table').count()).toBe(0);
    // Everything the console asked the API for without a token was refused.
    expect(apiCalls.every((c) => c.startsWith('401'))).toBe(true);
    await page.screenshot({ path: `${SCREENSHOTS}login.png` });
    const axe = await new AxeBuilder({ page }).withTags(['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']).analyze();
    expect(axe.violations.map((v) => v.id)).toEqual([]);

    await page.getByLabel('Access token').fill('not-a-token');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByRole('alert').textContent(), { timeout: 10_000 }).toMatch(/^401/);

    const token = await mint(key, { aud: 'console', role: 'admin', iat: nowSeconds(), exp: nowSeconds() + 600 }, 'k1');
    await page.getByLabel('Access token').fill(token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByRole('heading', { name: 'Overview' }).count(), { timeout: 15_000 }).toBe(1);
    // Kept for the session only, not in local storage.
    expect(await page.evaluate('localStorage.length')).toBe(0);
    await context.close();
  });
});
