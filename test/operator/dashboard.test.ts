// The dashboard served by the operator (the management API's Service), clicked through in a real headless
// Chromium against the in-memory API server: it asks for a project and a token and sends it as a bearer, shows
// the Apps and their runs from the RunLog cache, and makes API keys as ServiceAccounts labelled as Runlet keys,
// bound to the caller role, with a token from the TokenRequest API; a revoked key's ServiceAccount is deleted
// and its token refused.
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeObject } from '../../kube/objects.ts';
import type { Operator } from '../../operator/main.ts';
import { API_KEY_LABEL, API_KEY_ROLE } from '../../operator/api-keys.ts';
import { RUNS_ACCESS } from '../../management/kube-auth.ts';
import { startKubeApiServer, type KubeApiServer } from '../kube/index.ts';
import { API_SERVER_AUDIENCE } from '../kube/token-requests.ts';
import { launchBrowser } from '../support/browser.ts';
import { pythonSpec } from '../support/operator-apps.ts';
import { STATE_TIMEOUT_MS, createApp, createCodeConfigMap, createNamespace, isAppliedAtGeneration, paths, prepareCluster, testOperator, waitForApp, type TestCluster } from '../support/fake-cluster.ts';
import { runRecord } from '../support/runlog-source-kit.ts';
import { createPod, writeRunLog } from '../support/runlogs.ts';
import { waitFor } from '../support/wait.ts';
import { kubePathOf } from '../support/kube-path.ts';

const PROJECT = 'team';
const ADMIN_TOKEN = 'admin.token.x';
const ADMIN = 'system:serviceaccount:team:admin';
const SHOWN_MS = 15_000;

let cluster: TestCluster<KubeApiServer>;
let operator: Operator;
let browser: Browser;
let url: string;

async function signedInPage(): Promise<Page> {
  const page = await browser.newPage();
  page.setDefaultTimeout(SHOWN_MS);
  await page.goto(url);
  await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
  await page.getByLabel('Project (namespace)').fill(PROJECT);
  await page.getByLabel('Service-account token').fill(ADMIN_TOKEN);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { level: 1, name: 'Apps' }).waitFor();
  return page;
}

beforeAll(async () => {
  cluster = await prepareCluster(await startKubeApiServer());
  await createNamespace(cluster.api, PROJECT);
  await createCodeConfigMap(cluster.api, PROJECT, 'hello-code', 'hello', { 'main.py': 'def run(): pass\n' });
  operator = testOperator(cluster, {});
  operator.start();
  await waitFor(() => operator.ready, { timeoutMs: STATE_TIMEOUT_MS, what: 'the operator’s caches' });
  await createApp(cluster.api, PROJECT, 'hello', pythonSpec());
  await waitForApp(cluster.api, PROJECT, 'hello', isAppliedAtGeneration, 'reconciled');
  cluster.server.tokens.set(ADMIN_TOKEN, { username: ADMIN });
  cluster.server.allow({ user: ADMIN, namespace: PROJECT, ...RUNS_ACCESS });
  for (const verb of ['list', 'create', 'delete']) cluster.server.allow({ user: ADMIN, namespace: PROJECT, group: 'runlet.dev', resource: 'apikeys', verb });
  [url, browser] = await Promise.all([operator.listen(), launchBrowser()]);
});

afterAll(async () => {
  await browser?.close();
  await operator?.stop();
  await cluster?.close();
});

describe('the dashboard of the operator', () => {
  it('asks for a token, keeps it in the tab only, and shows Apps, runs and a run', async () => {
    const failed = runRecord({ projectId: PROJECT, appName: 'hello', replica: 'hello-abc', status: 'failure', async: true, mode: 'async', coldStartMs: 2400 });
    const running = runRecord({ projectId: PROJECT, appName: 'hello', replica: 'hello-abc', status: 'running' });
    // Runs of live pods: the janitor fails those of pods that are gone.
    for (const pod of ['hello-abc', 'hello-def']) await createPod(cluster.api, PROJECT, pod, 'hello');
    await writeRunLog(cluster.api, PROJECT, 'hello-abc', 'hello', [failed, running]);

    // A refused token: the sign-in page again, saying why.
    const refused = await browser.newPage();
    await refused.goto(url);
    await refused.getByLabel('Project (namespace)').fill(PROJECT);
    await refused.getByLabel('Service-account token').fill('a.forged.token');
    await refused.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => refused.getByRole('alert').textContent(), { timeout: SHOWN_MS }).toContain('The token was refused');
    await refused.close();

    const page = await signedInPage();
    const row = page.getByRole('row', { name: /hello/ });
    await expect.poll(() => row.textContent()).toContain('replicas');
    expect(await page.evaluate<string | null>(`sessionStorage.getItem('runlet.token')`)).toBe(ADMIN_TOKEN);
    expect((await page.context().cookies()).length).toBe(0);

    await page.getByRole('link', { name: 'hello' }).click();
    const rows = page.locator('tbody tr');
    await expect.poll(() => rows.count(), { timeout: SHOWN_MS }).toBe(2);
    expect(await rows.first().textContent()).toContain('running');
    expect(await rows.nth(1).textContent()).toContain('async');
    expect(await rows.nth(1).textContent()).toContain('ValueError: bad input');

    // A run arriving on another replica appears.
    const later = runRecord({ projectId: PROJECT, appName: 'hello', replica: 'hello-def' });
    await writeRunLog(cluster.api, PROJECT, 'hello-def', 'hello', [later]);
    await expect.poll(() => rows.count(), { timeout: SHOWN_MS }).toBe(3);

    await page.getByRole('link', { name: failed.id }).click();
    await page.getByRole('heading', { level: 1, name: `Run ${failed.id}` }).waitFor();
    const text = (await page.locator('main').textContent())!;
    for (const shown of ['ValueError: bad input', '2400 ms', 'hello-abc', 'No webhook was asked for.']) expect(text).toContain(shown);

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
    expect(await page.evaluate<string | null>(`sessionStorage.getItem('runlet.token')`)).toBeNull();
    await page.close();
  });

  it('makes a key as a ServiceAccount bound to the caller role with a TokenRequest token, and revokes it', async () => {
    const page = await signedInPage();
    await page.getByRole('link', { name: 'API keys' }).click();
    await page.getByLabel('Name').fill('ci');
    // Within the year a key may last at most.
    const expiresOn = new Date(Date.now() + 180 * 86_400_000).toISOString().slice(0, 10);
    await page.getByLabel('Expires on').fill(expiresOn);
    await page.getByRole('button', { name: 'Create key' }).click();
    const tokenField = page.getByLabel('Token');
    await tokenField.waitFor();
    const token = await tokenField.inputValue();
    await page.getByRole('row', { name: /ci/ }).waitFor();
    expect(await page.getByRole('row', { name: /ci/ }).textContent()).toContain(`${expiresOn} 23:59:59 UTC`);

    const account = await cluster.api.get<KubeObject & { metadata: { labels: Record<string, string>; uid: string } }>(paths.serviceAccount(PROJECT, 'runlet-key-ci'));
    expect(account.metadata.labels[API_KEY_LABEL]).toBe('true');
    const binding = await cluster.api.get<KubeObject & { roleRef: { name: string }; subjects: Array<{ name: string }> }>(paths.roleBinding(PROJECT, 'runlet-key-ci'));
    expect(binding.roleRef.name).toBe(API_KEY_ROLE);
    expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name: 'runlet-key-ci', namespace: PROJECT }]);
    const claims = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as { aud: string[]; exp: number };
    // For Runlet only (the sidecars, and the management API's TokenReview asks for it): not the API server's.
    expect(claims.aud).toEqual(['runlet']);
    expect(claims.aud).not.toContain(API_SERVER_AUDIENCE);
    expect(new Date(claims.exp * 1000).toISOString()).toBe(`${expiresOn}T23:59:59.000Z`);

    // The key reads the project's apps, as the caller role lets it (the in-memory server does not evaluate the
    // RoleBinding: the test grants what it grants).
    cluster.server.allow({ user: 'system:serviceaccount:team:runlet-key-ci', namespace: PROJECT, ...RUNS_ACCESS });
    const withKey = { headers: { authorization: `Bearer ${token}` } };
    expect((await fetch(`${url}/v2/projects/${PROJECT}/apps`, withKey)).status).toBe(200);

    page.once('dialog', (dialog) => void dialog.accept());
    await page.getByRole('button', { name: 'Revoke key ci' }).click();
    await page.getByText('Key ci revoked.').waitFor();
    expect(await cluster.api.find(paths.serviceAccount(PROJECT, 'runlet-key-ci'))).toBeUndefined();
    // The API server no longer authenticates its token: any review made from now on refuses it.
    const review = (await cluster.api.create(kubePathOf('/apis/authentication.k8s.io/v1/tokenreviews'), {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenReview',
      spec: { token },
    } as KubeObject)) as KubeObject & { status: { authenticated: boolean } };
    expect(review.status.authenticated).toBe(false);
    expect((await fetch(`${url}/v2/projects/${PROJECT}/keys`, withKey)).status).toBe(401);
    await page.close();
  });

  it('refuses the keys page to a token that may only list runs', async () => {
    cluster.server.tokens.set('reader.token.x', { username: 'reader' });
    cluster.server.allow({ user: 'reader', namespace: PROJECT, ...RUNS_ACCESS });
    const response = await fetch(`${url}/v2/projects/${PROJECT}/keys`, { method: 'POST', headers: { authorization: 'Bearer reader.token.x', 'content-type': 'application/json' }, body: JSON.stringify({ name: 'x', expiresAt: '2030-01-01T00:00:00Z' }) });
    expect(response.status).toBe(403);
    expect(((await response.json()) as { detail: string }).detail).toContain('needs verb "create" on resource "apikeys"');
    expect(await cluster.api.find(paths.serviceAccount(PROJECT, 'runlet-key-x'))).toBeUndefined();
  });
});
