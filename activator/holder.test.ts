// The holder authenticates a call as the App's sidecars would: with the caller's token unless the App turned
// auth off (they run with `--auth off` then), and before saying whether an App exists. The async calls it holds
// are recorded in its own namespace, and go when their App does or when they expire.
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { App } from '../crds/app-schema.ts';
import { KubeApi } from '../kube/client.ts';
import type { KubeObject } from '../kube/objects.ts';
import { RunAuthenticator } from '../run-request/auth/authenticator.ts';
import { signLocalToken } from '../run-request/auth/local-key.ts';
import { startKubeApiServer, type KubeApiServer } from '../test/kube/index.ts';
import { testLogger } from '../test/support/logger.ts';
import { pythonSpec, storedApp } from '../test/support/operator-apps.ts';
import { HELD_CALL_LABEL } from './hold-records.ts';
import { HELD_ASYNC_BODY_LIMIT_BYTES, startHolder, type Holder, type HolderOptions } from './holder.ts';
import { kubePathOf } from '../test/support/kube-path.ts';

const PROJECT_KEY = randomBytes(32).toString('hex');
const DEPLOYMENTS = '/apis/apps/v1/namespaces/team-a/deployments';
const HOLDER_NAMESPACE = 'runlet-system';
const RECORDS = `/api/v1/namespaces/${HOLDER_NAMESPACE}/secrets`;

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
    for (const name of ['open', 'closed']) await api.create(kubePathOf(DEPLOYMENTS), deployment(name));
    const apps: App[] = [storedApp(pythonSpec({ auth: { enabled: false } }), { name: 'open' }), storedApp(pythonSpec(), { name: 'closed' })];
    auth = new RunAuthenticator({ audience: 'runlet', hs256Keys: { 'team-a': new TextEncoder().encode(PROJECT_KEY) } });
    holder = await startHolder({
      api,
      apps: { get: (namespace, name) => apps.find((app) => app.metadata.namespace === namespace && app.metadata.name === name) },
      appsSynced: async () => {},
      auth,
      holderKeys: async () => randomBytes(32),
      logger: testLogger(),
      identity: 'holder-test',
      recordsNamespace: HOLDER_NAMESPACE,
      watchdogMs: 60_000,
      host: '127.0.0.1',
      port: 0,
      // No pod ever starts here: a held call ends at this limit.
      coldStartTimeoutMs: () => 300,
    });
    const call = (app: string, token?: string) =>
      fetch(`${holder!.url}/v4/team-a/${app}/run`, { method: 'POST', headers: token === undefined ? {} : { authorization: `Bearer ${token}` }, body: '{}' });
    const replicas = async (name: string) => (await api!.get<KubeObject & { spec: { replicas: number } }>(kubePathOf(`${DEPLOYMENTS}/${name}`))).spec.replicas;

    const open = await call('open');
    expect(open.status, 'held, then out of time').toBe(503);
    expect(await open.json()).toMatchObject({ type: 'https://runlet.dev/problems#cold-start-timeout' });
    expect(await replicas('open'), 'woken').toBe(1);

    expect((await call('closed')).status).toBe(401);
    expect(await replicas('closed'), 'a refused call wakes nothing').toBe(0);

    expect((await call('nowhere')).status, 'unknown App, no token').toBe(401);
    expect((await call('nowhere', await signLocalToken({ projectId: 'team-a', key: PROJECT_KEY }))).status).toBe(404);
  });

  it('drops the held async calls of a deleted App at once, and those past their expiry at the sweep', async () => {
    server = await startKubeApiServer({ namespaces: ['team-a', HOLDER_NAMESPACE] });
    api = new KubeApi(await server.credentials());
    for (const name of ['open', 'closed']) await api.create(kubePathOf(DEPLOYMENTS), deployment(name));
    let apps: App[] = [storedApp(pythonSpec({ auth: { enabled: false } }), { name: 'open' }), storedApp(pythonSpec({ auth: { enabled: false } }), { name: 'closed' })];
    const dropped: string[] = [];
    const key = randomBytes(32);
    const options: HolderOptions = {
      api,
      apps: { get: (namespace, name) => apps.find((app) => app.metadata.namespace === namespace && app.metadata.name === name) },
      appsSynced: async () => {},
      auth: null,
      holderKeys: async () => key,
      logger: testLogger(),
      identity: 'holder-test',
      recordsNamespace: HOLDER_NAMESPACE,
      watchdogMs: 60_000,
      host: '127.0.0.1',
      port: 0,
      // No pod ever starts here: each held call waits, and is claimed again, until it is dropped.
      coldStartTimeoutMs: () => 100,
      retryDelayMs: 50,
      // Swept by the test, not by the clock.
      sweepIntervalMs: 3_600_000,
      metrics: { handedOver: () => {}, timedOut: () => {}, accepted: () => {}, dropped: (namespace, app, why) => dropped.push(`${namespace}/${app} ${why}`), refused: () => {}, cancelled: () => {} },
    };
    holder = await startHolder(options);
    const hold = async (app: string) => {
      const answer = await fetch(`${holder!.url}/v4/team-a/${app}/run?async=true`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
      expect(answer.status).toBe(202);
    };
    const recordsOf = async (app: string) => (await api!.list(kubePathOf(RECORDS), { labelSelector: `${HELD_CALL_LABEL}=${app}` })).items.length;
    await hold('open');
    await hold('closed');
    expect([await recordsOf('open'), await recordsOf('closed')]).toEqual([1, 1]);

    apps = apps.filter((app) => app.metadata.name !== 'closed');
    await holder.appDeleted('team-a', 'closed');
    expect([await recordsOf('open'), await recordsOf('closed')], 'the deleted App’s record gone, the other kept').toEqual([1, 0]);
    expect(await holder.recover(), 'a live record this holder hands over already is not taken twice').toBe(0);
    expect(await recordsOf('open')).toBe(1);
    await holder.close();

    // Another holder replica, whose records expire at once (as if a day had gone by); the first one's claim is fresh.
    holder = await startHolder({ ...options, identity: 'holder-other', heldCallTtlMs: 0 });
    await hold('open');
    expect(await recordsOf('open')).toBe(2);
    expect(await holder.recover()).toBe(0);
    expect(await recordsOf('open'), 'the expired one gone, the first holder’s kept').toBe(1);
    expect(dropped).toEqual(['team-a/open expired']);
  });

  it('refuses at once (413) an async call at zero whose body its record could not hold, and keeps one that fits', async () => {
    server = await startKubeApiServer({ namespaces: ['team-a', HOLDER_NAMESPACE] });
    api = new KubeApi(await server.credentials());
    await api.create(kubePathOf(DEPLOYMENTS), deployment('open'));
    const apps: App[] = [storedApp(pythonSpec({ auth: { enabled: false } }), { name: 'open' })];
    const key = randomBytes(32);
    holder = await startHolder({
      api,
      apps: { get: (namespace, name) => apps.find((app) => app.metadata.namespace === namespace && app.metadata.name === name) },
      appsSynced: async () => {},
      auth: null,
      holderKeys: async () => key,
      logger: testLogger(),
      identity: 'holder-test',
      recordsNamespace: HOLDER_NAMESPACE,
      watchdogMs: 60_000,
      host: '127.0.0.1',
      port: 0,
      coldStartTimeoutMs: () => 100,
    });
    // A JSON object of exactly `bytes` bytes.
    const body = (bytes: number) => `{"pad":"${'x'.repeat(bytes - 10)}"}`;
    const hold = (text: string) => fetch(`${holder!.url}/v4/team-a/open/run?async=true`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: text });

    const over = await hold(body(HELD_ASYNC_BODY_LIMIT_BYTES + 1));
    expect(over.status).toBe(413);
    const problem = (await over.json()) as { type: string; detail: string };
    expect(problem.type).toBe('https://runlet.dev/problems#body-too-large');
    expect(problem.detail).toContain(`${HELD_ASYNC_BODY_LIMIT_BYTES} bytes`);
    expect((await api.list(kubePathOf(RECORDS), { labelSelector: HELD_CALL_LABEL })).items, 'nothing recorded').toEqual([]);

    expect((await hold(body(HELD_ASYNC_BODY_LIMIT_BYTES))).status).toBe(202);
    expect((await api.list(kubePathOf(RECORDS), { labelSelector: HELD_CALL_LABEL })).items).toHaveLength(1);
  });

  it('answers no 202 for an async call whose record cannot be written (its namespace missing), and logs where it was to be kept', async () => {
    server = await startKubeApiServer({ namespaces: ['team-a'] });
    api = new KubeApi(await server.credentials());
    await api.create(kubePathOf(DEPLOYMENTS), deployment('open'));
    const apps: App[] = [storedApp(pythonSpec({ auth: { enabled: false } }), { name: 'open' })];
    const lines: string[] = [];
    holder = await startHolder({
      api,
      apps: { get: (namespace, name) => apps.find((app) => app.metadata.namespace === namespace && app.metadata.name === name) },
      appsSynced: async () => {},
      auth: null,
      holderKeys: async () => randomBytes(32),
      logger: pino({ level: 'error' }, { write: (line: string) => lines.push(line) }),
      identity: 'holder-test',
      recordsNamespace: 'runlet-system-held',
      watchdogMs: 60_000,
      host: '127.0.0.1',
      port: 0,
      coldStartTimeoutMs: () => 100,
    });
    const answer = await fetch(`${holder.url}/v4/team-a/open/run?async=true`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(answer.status).toBe(500);
    expect(await answer.json()).toMatchObject({ type: 'https://runlet.dev/problems#internal-error' });
    expect(lines.join('\n')).toContain('as a Secret in the namespace runlet-system-held');
  });
});
