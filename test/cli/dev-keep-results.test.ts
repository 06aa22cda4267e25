// Results kept for later ([runs] keep_results) through a real `runlet dev` process: each mode's result, and a
// failed run's error, is returned by the get of its run (not by the list); a result over result_keep_bytes is
// not kept, and says so; an app that keeps none returns none. The dashboard's run page (headless Chromium)
// shows a kept result, one not kept, and one expired.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser } from '../support/browser.ts';
import { spawnDev, type DevProcess } from '../support/dev-process.ts';
import { waitFor } from '../support/wait.ts';

const MAIN = `def echo(value):
    return value


def count(n: int):
    for i in range(n):
        yield {"i": i}


def fail():
    raise ValueError("no such thing")


def big():
    return "x" * 5000
`;

async function makeApp(name: string, runs: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `runlet-keep-${name}-`));
  await writeFile(join(dir, 'main.py'), MAIN);
  await writeFile(join(dir, 'service.toml'), `[deployment]\nname = "${name}"\n\n[runs]\n${runs}\n`);
  return dir;
}

describe('runlet dev: results kept for later', () => {
  let dev: DevProcess;
  let browser: Browser | undefined;
  const dirs: string[] = [];

  beforeAll(async () => {
    dirs.push(await makeApp('keeper', 'keep_results = true\nresult_keep_bytes = 2048\nresult_ttl = 600'));
    dirs.push(await makeApp('forgetter', 'keep_finished = 50'));
    dirs.push(await makeApp('brief', 'keep_results = true\nresult_ttl = 1'));
    dirs.push(await mkdtemp(join(tmpdir(), 'runlet-keep-data-')));
    dev = await spawnDev(dirs.slice(0, 3), dirs[3]!);
  });
  afterAll(async () => {
    await browser?.close();
    if (dev?.child.exitCode === null) dev.child.kill('SIGTERM');
    await dev?.exited;
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  });

  async function call(app: string, fn: string, body: object, options: { query?: string; accept?: string } = {}): Promise<Response> {
    return fetch(`${dev.url}/v4/dev/${app}/${fn}${options.query ?? ''}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: options.accept ?? 'application/json' },
      body: JSON.stringify(body),
    });
  }

  async function getRun(app: string, runId: string): Promise<Record<string, unknown>> {
    const response = await fetch(`${dev.url}/v2/projects/dev/apps/${app}/runs/${runId}`);
    expect(response.status).toBe(200);
    return ((await response.json()) as { item: Record<string, unknown> }).item;
  }

  /** The run once it has finished and its result, if kept, is recorded. */
  function finishedRun(app: string, runId: string): Promise<Record<string, unknown>> {
    return waitFor(async () => {
      const run = await getRun(app, runId);
      return run.completedAt !== null && 'resultKept' in run ? run : undefined;
    }, { what: `run ${runId} finished with its result recorded` });
  }

  it('keeps a sync result, and leaves it out of the list', async () => {
    const value = { text: 'h\u00e9llo \u{1F600}', list: [1, 2.5, null, true] };
    const response = await call('keeper', 'echo', { value });
    expect(response.status).toBe(200);
    const { run_id: runId } = (await response.json()) as { run_id: string };
    const run = await finishedRun('keeper', runId);
    expect(run).toMatchObject({ status: 'success', resultKept: true, result: value });
    expect(Date.parse(run.resultExpiresAt as string)).toBeGreaterThan(Date.now() + 500_000);
    const list = (await (await fetch(`${dev.url}/v2/projects/dev/apps/keeper/runs`)).json()) as { items: Record<string, unknown>[] };
    const listed = list.items.find((item) => item.id === runId);
    expect(listed).toMatchObject({ resultKept: true });
    expect(listed).not.toHaveProperty('result');
  });

  it('keeps an async run\'s result, which its caller gets no other way without a webhook', async () => {
    const response = await call('keeper', 'echo', { value: [1, 'two'] }, { query: '?async=true' });
    expect(response.status).toBe(202);
    const { run_id: runId } = (await response.json()) as { run_id: string };
    expect(await finishedRun('keeper', runId)).toMatchObject({ async: true, status: 'success', result: [1, 'two'] });
  });

  it('keeps a stream\'s items as a list', async () => {
    const response = await call('keeper', 'count', { n: 3 }, { accept: 'text/event-stream' });
    expect(response.status).toBe(200);
    const runId = response.headers.get('x-request-id')!;
    await response.text();
    expect(await finishedRun('keeper', runId)).toMatchObject({ mode: 'stream', result: [{ i: 0 }, { i: 1 }, { i: 2 }] });
  });

  it('keeps a failed run\'s error', async () => {
    const response = await call('keeper', 'fail', {});
    expect(response.status).toBeGreaterThanOrEqual(400);
    const runId = response.headers.get('x-request-id')!;
    const run = await finishedRun('keeper', runId);
    expect(run).toMatchObject({ status: 'failure', resultKept: true, result: { type: 'ValueError', message: expect.stringContaining('no such thing') as unknown } });
    expect(run.result).toEqual(run.error);
  });

  it('keeps no result over result_keep_bytes, and says so', async () => {
    const response = await call('keeper', 'big', {});
    expect(response.status).toBe(200);
    const runId = response.headers.get('x-request-id')!;
    const run = await finishedRun('keeper', runId);
    expect(run).toMatchObject({ status: 'success', resultKept: false });
    expect(run).not.toHaveProperty('result');
  });

  it('keeps nothing for an app that keeps no results', async () => {
    const response = await call('forgetter', 'echo', { value: 'gone' });
    expect(response.status).toBe(200);
    const runId = response.headers.get('x-request-id')!;
    const run = await waitFor(async () => {
      const record = await getRun('forgetter', runId);
      return record.completedAt !== null ? record : undefined;
    });
    expect(run).not.toHaveProperty('result');
    expect(run).not.toHaveProperty('resultKept');
  });

  it('the dashboard\'s run page shows a kept result, one not kept, and one expired', async () => {
    const runIdOf = async (response: Response): Promise<string> => ((await response.json()) as { run_id: string }).run_id;
    const kept = await runIdOf(await call('keeper', 'echo', { value: { shown: 'on the page <b>as text</b>' } }));
    const large = await runIdOf(await call('keeper', 'big', {}));
    const brief = await runIdOf(await call('brief', 'echo', { value: 'short-lived' }));
    await finishedRun('keeper', kept);
    await finishedRun('keeper', large);
    // Past its one second: the API no longer returns it.
    await waitFor(async () => {
      const run = await getRun('brief', brief);
      return run.resultKept === true && !('result' in run);
    }, { what: 'the brief result to expire' });

    browser = await launchBrowser();
    const page = await browser.newPage();
    page.setDefaultTimeout(15_000);
    const shown = async (app: string, runId: string): Promise<string> => {
      await page.goto(`${dev.url}/#/apps/${app}/runs/${runId}`);
      // The page of this run, not the one before it (a new hash re-renders the same document).
      await page.getByRole('heading', { level: 1, name: `Run ${runId}` }).waitFor();
      await page.getByRole('heading', { level: 2, name: 'Result' }).waitFor();
      return (await page.locator('main').textContent())!;
    };
    const keptText = await shown('keeper', kept);
    expect(keptText).toContain('Kept until');
    expect(await page.getByLabel('Result').textContent()).toBe(JSON.stringify({ shown: 'on the page <b>as text</b>' }, null, 2));
    expect(await shown('keeper', large)).toContain('Not kept: it was larger than the app keeps (result_keep_bytes).');
    expect(await shown('brief', brief)).toMatch(/Expired at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(result_ttl\)\./);
  });
});
