// `npm run screenshots`: writes docs/images/dashboard-*.png, the README's pictures of each dashboard page, taken
// in the headless Chromium the dashboard's tests use, of `runlet dev` serving examples/hello with a few runs. The
// app keeps its results here (`[runs] keep_results`), so the run page shows its result section too.
import { appendFile, cp, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { signLocalToken } from '../../run-request/auth/local-key.ts';
import { launchBrowser } from '../support/browser.ts';
import { spawnDev } from '../support/dev-process.ts';

const root = resolve(import.meta.dirname, '../..');
const images = join(root, 'docs/images');
const AUTH_KEY = 'the auth key of the dashboard screenshots, 32 bytes or more';

const work = await mkdtemp(join(tmpdir(), 'runlet-screenshots-'));
const keyFile = join(work, 'dev.key');
await writeFile(keyFile, AUTH_KEY);
const app = join(work, 'hello');
await cp(join(root, 'examples/hello'), app, { recursive: true });
await appendFile(join(app, 'service.toml'), '\n[runs]\nkeep_results = true\n');
const dev = await spawnDev([app], join(work, 'data'), ['--auth-key-file', keyFile]);
const browser = await launchBrowser();
try {
  const token = await signLocalToken({ projectId: 'dev', key: AUTH_KEY });
  const call = (path: string, body: object) =>
    fetch(`${dev.url}/v4/dev/hello/${path}`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  for (const name of ['Ada', 'Grace', 'Alan']) await call('run', { name });
  await call('fail', { message: 'no such customer: 42' });
  await call('count?async=true', { n: 3, pause: 0.1 });
  const shown = await call('run', { name: 'Edsger' });
  const runId = shown.headers.get('x-request-id')!;

  await mkdir(images, { recursive: true });
  const page = await browser.newPage({ viewport: { width: 1200, height: 640 } });
  const shoot = async (hash: string, heading: string, file: string, section?: string): Promise<void> => {
    await page.goto(`${dev.url}/${hash}`);
    await page.getByRole('heading', { level: 1, name: heading }).waitFor();
    if (section !== undefined) await page.getByRole('heading', { level: 2, name: section }).waitFor();
    await page.waitForLoadState('networkidle');
    await page.screenshot({ path: join(images, file), fullPage: true });
    process.stdout.write(`wrote docs/images/${file}\n`);
  };
  await shoot('#/apps', 'Apps', 'dashboard-apps.png');
  await shoot('#/apps/hello', 'Runs of hello', 'dashboard-runs.png');
  await shoot(`#/apps/hello/runs/${runId}`, `Run ${runId}`, 'dashboard-run.png', 'Result');
  await page.goto(`${dev.url}/#/keys`);
  await page.getByLabel('Name').fill('staging');
  await page.getByRole('button', { name: 'Create key' }).click();
  await page.getByLabel('Token').waitFor();
  await page.screenshot({ path: join(images, 'dashboard-keys.png'), fullPage: true });
  process.stdout.write('wrote docs/images/dashboard-keys.png\n');
} finally {
  await browser.close();
  dev.child.kill('SIGTERM');
  await dev.exited;
  await rm(work, { recursive: true, force: true });
}
