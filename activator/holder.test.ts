// The holder authenticates a call as the App's sidecars would: with the caller's token unless the App turned
// auth off (they run with `--auth off` then), and before saying whether an App exists.
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import type { App } from '../crds/app-schema.ts';
import { KubeApi } from '../kube/client.ts';
import type { KubeObject } from '../kube/objects.ts';
import { RunAuthenticator } from '../run-request/auth/authenticator.ts';
import { signLocalToken } from '../run-request/auth/local-key.ts';
import { startKubeApiServer, type KubeApiServer } from '../test/kube/index.ts';
import { testLogger } from '../test/support/logger.ts';
import { pythonSpec, storedApp } from '../test/support/operator-apps.ts';
import { startHolder, type Holder } from './holder.ts';

const PROJECT_KEY = randomBytes(32).toString('hex');
const DEPLOYMENTS = '/apis/apps/v1/namespaces/team-a/deployments';

function deployment(name: string): KubeObject {
  const labels = { app: name };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name },
    spec: { replicas: 0, selector: { matchLabels: labels }, template: { metadata: { labels }, spec: { containers: [{ name: 'app', image: 'app:1' }] } } },
  } as KubeObject;
}

describe('the holder’s authentication', () => {
  let server: KubeApiServer | undefined;
  let api: KubeApi | undefined;
  let auth: RunAuthenticator | undefined;
  let holder: Holder | undefined;
  afterEach(async () => {
    await holder?.close();
    await auth?.close();
    await api?.close();
    await server?.close();
  });

  it('holds a call to an App with auth off without a token, refuses one to an App with auth on, and hides which Apps exist', async () => {
    server = await startKubeApiServer({ namespaces: ['team-a'] });
    api = new KubeApi(await server.credentials());
    for (const name of ['open', 'closed']) await api.create(DEPLOYMENTS, deployment(name));
    const apps: App[] = [storedApp(pythonSpec({ auth: { enabled: false } }), { name: 'open' }), storedApp(pythonSpec(), { name: 'closed' })];
    auth = new RunAuthenticator({ audience: 'runlet', hs256Keys: { 'team-a': new TextEncoder().encode(PROJECT_KEY) } });
    holder = await startHolder({
      api,
      apps: { get: (namespace, name) => apps.find((app) => app.metadata.namespace === namespace && app.metadata.name === name) },
      appsSynced: async () => {},
      auth,
      holderKeys: () => randomBytes(32),
      logger: testLogger(),
      identity: 'holder-test',
      watchdogMs: 60_000,
      host: '127.0.0.1',
      port: 0,
      // No pod ever starts here: a held call ends at this limit.
      coldStartTimeoutMs: () => 300,
    });
    const call = (app: string, token?: string) =>
      fetch(`${holder!.url}/v4/team-a/${app}/run`, { method: 'POST', headers: token === undefined ? {} : { authorization: `Bearer ${token}` }, body: '{}' });
    const replicas = async (name: string) => (await api!.get<KubeObject & { spec: { replicas: number } }>(`${DEPLOYMENTS}/${name}`)).spec.replicas;

    const open = await call('open');
    expect(open.status, 'held, then out of time').toBe(503);
    expect(await open.json()).toMatchObject({ type: 'https://runlet.dev/problems#cold-start-timeout' });
    expect(await replicas('open'), 'woken').toBe(1);

    expect((await call('closed')).status).toBe(401);
    expect(await replicas('closed'), 'a refused call wakes nothing').toBe(0);

    expect((await call('nowhere')).status, 'unknown App, no token').toBe(401);
    expect((await call('nowhere', await signLocalToken({ projectId: 'team-a', key: PROJECT_KEY }))).status).toBe(404);
  });
});
