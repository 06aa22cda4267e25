// The dashboard served by `runlet dev` at `/`, clicked through in a real headless Chromium: the apps page, an
// app's runs (filters, pages, new runs appearing), a run (timings, webhook, error, Cancel), and the API keys
// page (a key made with a name and an expiry works on the run interface, is listed, and once revoked is refused).
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signLocalToken } from '../../run-request/auth/local-key.ts';
import { launchBrowser } from '../support/browser.ts';
import { spawnDev, type DevProcess } from '../support/dev-process.ts';
import { WebhookReceiver } from '../support/webhook-receiver.ts';
import { waitFor } from '../support/wait.ts';

const HELLO = resolve(import.meta.dirname, '../../examples/hello');
const AUTH_KEY = 'the dev auth key of the dashboard test, 32 bytes or more';
/** Bound for what the page shows after an action: it polls every 2 s; generous for a loaded 2-core machine. */
const SHOWN_MS = 15_000;

let browser: Browser;
let dev: DevProcess;
let receiver: WebhookReceiver;
let adminToken: string;

async function call(path: string, body: object, token = adminToken): Promise<Response> {
  return fetch(`${dev.url}/v4/dev/hello/${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify(body),
  });
}

async function newPage(): Promise<Page> {
  const page = await browser.newPage();
  page.setDefaultTimeout(SHOWN_MS);
  return page;
}

beforeAll(async () => {
  const dir = await mkdtemp(join(tmpdir(), 'runlet-dashboard-dev-'));
  const keyFile = join(dir, 'dev.key');
  await writeFile(keyFile, AUTH_KEY);
  adminToken = await signLocalToken({ projectId: 'dev', key: AUTH_KEY });
  [browser, dev, receiver] = await Promise.all([launchBrowser(), spawnDev([HELLO], join(dir, 'data'), ['--auth-key-file', keyFile]), WebhookReceiver.start()]);
});

afterAll(async () => {
  await browser?.close();
  await receiver?.close();
  if (dev && dev.child.exitCode === null) dev.child.kill('SIGKILL');
  await dev?.exited;
});

describe('the dashboard of runlet dev', () => {
  it('lists the apps with status, replicas, scaling and last error, and reaches every page by keyboard', async () => {
    const page = await newPage();
    await page.goto(dev.url);
    const row = page.getByRole('row', { name: /hello/ });
    await expect.poll(() => row.textContent()).toContain('ready');
    expect(await row.textContent()).toContain('1 ready of 1');
    expect(await row.textContent()).toContain('1–10 replicas, 4 calls each');
    // Each page's heading has the focus, as after a page load; from it, Tab reaches the page's links and Enter follows them.
    await expect.poll(() => page.evaluate<string | undefined>('document.activeElement?.tagName')).toBe('H1');
    await page.keyboard.press('Tab');
    expect(await page.evaluate<string | undefined>('document.activeElement?.textContent')).toBe('hello');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { level: 1, name: 'Runs of hello' }).waitFor();
    // The heading takes the focus once the page's first load is shown, which may be after the heading is.
    await expect.poll(() => page.evaluate<string | undefined>('document.activeElement?.textContent')).toBe('Runs of hello');
    // The navigation: the first Tab stop of a fresh page is the skip link, then the pages.
    await page.goto(`${dev.url}/#/keys`);
    await page.getByRole('heading', { level: 1, name: 'API keys' }).waitFor();
    expect(await page.getByRole('link', { name: 'API keys' }).getAttribute('aria-current')).toBe('page');
    expect(await page.getByRole('link', { name: 'Apps' }).getAttribute('aria-current')).toBeNull();
    await page.getByRole('link', { name: 'Skip to content' }).focus();
    await page.keyboard.press('Tab');
    expect(await page.evaluate<string | undefined>('document.activeElement?.textContent')).toBe('Apps');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { level: 1, name: 'Apps' }).waitFor();
    await page.close();
  });

  it("shows an app's runs, async calls marked, filtered, by page, with new runs appearing", async () => {
    const hostile = '<img src=x onerror="document.body.dataset.owned=1">';
    expect((await call('fail', { message: hostile })).status).toBe(500);
    expect((await fetch(`${dev.url}/v4/dev/hello/run?async=true`, { method: 'POST', headers: { authorization: `Bearer ${adminToken}` }, body: '{"name":"async"}' })).status).toBe(202);
    for (let i = 0; i < 22; i++) expect((await call('run', { name: `n${i}` })).status).toBe(200);

    const page = await newPage();
    await page.goto(`${dev.url}/#/apps`);
    await page.getByRole('link', { name: 'hello' }).click();
    await page.getByRole('heading', { level: 1, name: 'Runs of hello' }).waitFor();
    // Rows of a table whose load has finished: a filter change keeps the old rows until its answer comes.
    const rows = page.locator('div[aria-busy="false"] tbody tr');
    await expect.poll(() => rows.count()).toBe(20);

    // The next page holds the older runs: the async one and the failure among them.
    await page.getByRole('button', { name: 'Older runs' }).click();
    await expect.poll(() => rows.count()).toBe(4);
    expect(await page.locator('tbody').textContent()).toContain('async');
    await page.getByRole('button', { name: 'Newer runs' }).click();
    await expect.poll(() => rows.count()).toBe(20);

    // Filters: failures only. The error is shown as text, whatever it holds.
    await page.getByLabel('Status').selectOption('failure');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await expect.poll(() => rows.count()).toBe(1);
    expect(await rows.first().textContent()).toContain(`ValueError: ${hostile}`);
    expect(await page.evaluate<string | undefined>('document.body.dataset.owned')).toBeUndefined();
    expect(await page.locator('tbody img').count()).toBe(0);

    // Async only.
    await page.getByLabel('Status').selectOption('');
    await page.getByLabel('Async calls only').check();
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await expect.poll(async () => [await rows.count(), await rows.first().getByText('async', { exact: true }).count()]).toEqual([1, 1]);

    // A run arriving while the page is shown appears, and is announced.
    expect((await fetch(`${dev.url}/v4/dev/hello/run?async=true`, { method: 'POST', headers: { authorization: `Bearer ${adminToken}` }, body: '{"name":"later"}' })).status).toBe(202);
    await expect.poll(() => rows.count(), { timeout: SHOWN_MS }).toBe(2);
    await expect.poll(() => page.getByRole('status').first().textContent(), { timeout: SHOWN_MS }).toBe('1 new run');
    await page.close();
  });

  it('shows a run with its timings, webhook and error, and cancels a running one', async () => {
    const hook = encodeURIComponent(receiver.at('/hook').toString());
    const failed = await call(`fail?webhookEndpoint=${hook}`, { message: 'boom' });
    const failedId = failed.headers.get('x-request-id')!;
    await receiver.received(1);

    const page = await newPage();
    await page.goto(`${dev.url}/#/apps/hello/runs/${failedId}`);
    await page.getByRole('heading', { level: 1, name: `Run ${failedId}` }).waitFor();
    const details = page.locator('main');
    await expect.poll(() => details.textContent()).toContain('delivered');
    const text = (await details.textContent())!;
    for (const shown of ['ValueError: boom', 'Queue time', 'Cold start', 'Run time', 'Response time', 'Attempts1', '/hook']) expect(text).toContain(shown);

    // A run under way: async, a long stream; Cancel stops it, and the page shows it cancelled.
    const started = await fetch(`${dev.url}/v4/dev/hello/count?async=true`, { method: 'POST', headers: { authorization: `Bearer ${adminToken}` }, body: '{"n":200,"pause":0.5}' });
    const runId = ((await started.json()) as { run_id: string }).run_id;
    await waitFor(async () => {
      const run = (await (await fetch(`${dev.url}/v2/projects/dev/apps/hello/runs/${runId}`)).json()) as { item: { status: string } };
      return run.item.status === 'running';
    }, { timeoutMs: SHOWN_MS, what: 'the long run running' });
    await page.goto(`${dev.url}/#/apps/hello/runs/${runId}`);
    await page.getByRole('button', { name: 'Cancel run' }).click();
    await expect.poll(() => details.textContent(), { timeout: SHOWN_MS }).toContain('cancel_requested');
    expect(await details.textContent()).toContain('cancelled');
    expect(await page.getByRole('button', { name: 'Cancel run' }).count()).toBe(0);
    await page.close();
  });

  it('makes an API key with a name and an expiry, shows its token once, lists it, and revokes it', async () => {
    const page = await newPage();
    await page.goto(`${dev.url}/#/keys`);
    await page.getByLabel('Name').fill('staging');
    // Within the year a key may last at most.
    const expiresOn = new Date(Date.now() + 200 * 86_400_000).toISOString().slice(0, 10);
    await page.getByLabel('Expires on').fill(expiresOn);
    await page.getByRole('button', { name: 'Create key' }).click();
    const tokenField = page.getByLabel('Token');
    await tokenField.waitFor();
    const token = await tokenField.inputValue();
    expect(await page.evaluate<string | undefined>('document.activeElement?.id')).toBe('new-token');

    // The token works on the run interface, and expires at the end of the day chosen.
    expect((await call('run', { name: 'key' }, token)).status).toBe(200);
    const payload = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as { exp: number };
    expect(new Date(payload.exp * 1000).toISOString()).toBe(`${expiresOn}T23:59:59.000Z`);
    const row = page.getByRole('row', { name: /staging/ });
    expect(await row.textContent()).toContain(`${expiresOn} 23:59:59 UTC`);

    // Shown once: not in the list, nor after a reload.
    await page.reload();
    await page.getByRole('heading', { level: 1, name: 'API keys' }).waitFor();
    await row.waitFor();
    expect(await page.getByLabel('Token').count()).toBe(0);
    expect(await page.content()).not.toContain(token);

    // A second key of that name is refused, with the reason shown.
    await page.getByLabel('Name').fill('staging');
    await page.getByRole('button', { name: 'Create key' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('key-exists');

    page.once('dialog', (dialog) => void dialog.accept());
    await page.getByRole('button', { name: 'Revoke key staging' }).click();
    await page.getByText('Key staging revoked.').waitFor();
    expect(await page.getByRole('row', { name: /staging/ }).count()).toBe(0);
    // Refused at once.
    const refused = await call('run', { name: 'key' }, token);
    expect(refused.status).toBe(401);
    expect(((await refused.json()) as { detail: string }).detail).toContain('revoked');
    expect((await call('run', { name: 'other' })).status).toBe(200);
    await page.close();
  });
});
