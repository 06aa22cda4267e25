// kube/'s client against the in-memory API server, reached as from a pod (service-account CA and token, TLS).
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startKubeApiServer, type KubeApiServer } from '../test/kube/index.ts';
import { KubeApi } from './client.ts';
import { KubeApiError, isConflict, isNotFound } from './errors.ts';
import { pluralOf, resourcePath, type KubeObject } from './objects.ts';
import { KubePath } from './paths.ts';

let server: KubeApiServer;
let api: KubeApi;

beforeEach(async () => {
  server = await startKubeApiServer();
  api = new KubeApi(await server.credentials(), { fieldManager: 'kube-client-test', requestTimeoutMs: 10_000 });
});

afterEach(async () => {
  await api.close();
  await server.close();
});

const configMaps = resourcePath({ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'default' });

describe('KubeApi', () => {
  it('deletes only the object its preconditions name', async () => {
    const created = await api.create<KubeObject>(configMaps, { metadata: { name: 'kept' } });
    const path = configMaps.named('kept');
    const refused = await api.delete(path, { uid: 'another-uid' }).catch((error: unknown) => error);
    expect(isConflict(refused), String(refused)).toBe(true);
    expect(await api.find(path)).toBeDefined();
    await api.delete(path, { uid: created.metadata!.uid! });
    expect(await api.find(path)).toBeUndefined();
  });

  it('applies as its field manager, and needs one to apply', async () => {
    const applied = await api.apply<KubeObject & { data: Record<string, string> }>({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'applied', namespace: 'default' }, data: { a: '1' } });
    expect(applied.data).toEqual({ a: '1' });
    expect(server.requests.at(-1)?.query).toMatchObject({ fieldManager: 'kube-client-test', force: 'true' });
    const anonymous = new KubeApi(await server.credentials());
    expect(() => anonymous.apply({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x', namespace: 'default' } })).toThrow('server-side apply needs a field manager');
  });

  it("fails with the server's Status: status, reason, Retry-After", async () => {
    server.failNext({ method: 'GET', pathPattern: '/configmaps/busy', status: 429, reason: 'TooManyRequests', message: 'slow down', retryAfterSeconds: 2 });
    const error = await api.get(configMaps.named('busy')).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(KubeApiError);
    expect(error).toMatchObject({ status: 429, reason: 'TooManyRequests', retryAfterMs: 2000, message: `GET ${configMaps}/busy: 429 TooManyRequests: slow down` });
    expect(isNotFound(await api.get(configMaps.named('missing')).catch((caught: unknown) => caught))).toBe(true);
  });

  it('names a transport failure as no answer', async () => {
    server.pause('refuse');
    const error = await api.get(configMaps.named('any')).catch((caught: unknown) => caught);
    expect(error).toMatchObject({ status: 0 });
    expect((error as Error).message).toMatch(new RegExp(`^GET ${configMaps}/any: no answer: `));
  });

  it("bounds one call by its own timeout instead of the client's", async () => {
    server.hangNext({ method: 'PUT', pathPattern: '/configmaps/held' });
    const created = await api.create<KubeObject>(configMaps, { metadata: { name: 'held' } });
    // The client's bound is 10 s; this call's 300 ms ends it long before.
    const error = await api.replace(configMaps.named('held'), created, { timeoutMs: 300 }).catch((caught: unknown) => caught);
    expect(error).toMatchObject({ status: 0 });
    expect((error as Error).message).toMatch(/timed out|aborted/i);
    expect(await api.get(configMaps.named('held'), { timeoutMs: 300 })).toMatchObject({ metadata: { name: 'held' } });
  });
});

describe('KubeApi reading a named object', () => {
  /** An API server that answers every GET with team-b's ServiceAccount `runlet-key-prod`, whatever was asked. */
  async function misdirectingServer(): Promise<{ api: KubeApi; close: () => Promise<void> }> {
    const wrong = { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'runlet-key-prod', namespace: 'team-b', uid: 'b' } };
    const http = createServer((_request, response) => response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(wrong)));
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    const credentials = { ...(await server.credentials()), server: `http://127.0.0.1:${(http.address() as AddressInfo).port}` };
    const misdirected = new KubeApi(credentials);
    return { api: misdirected, close: async () => (await misdirected.close(), await new Promise<void>((resolve) => http.close(() => resolve()))) };
  }

  it('refuses an answer that is another object than the one asked for', async () => {
    const { api: misdirected, close } = await misdirectingServer();
    try {
      const accounts = KubePath.of({ version: 'v1', namespace: 'team-a', resource: 'serviceaccounts' });
      for (const asked of [accounts.named('runlet-key-ci'), accounts.named('runlet-key-prod'), KubePath.of({ version: 'v1', namespace: 'team-b', resource: 'serviceaccounts', name: 'other' })]) {
        const error = await misdirected.get(asked).catch((caught: unknown) => caught);
        expect(error).toMatchObject({ name: 'KubeApiError', reason: 'WrongObject' });
        expect((error as Error).message).toContain('the answer is team-b/runlet-key-prod, not the object asked for');
        expect(await misdirected.find(asked).catch((caught: unknown) => caught)).toMatchObject({ reason: 'WrongObject' });
      }
      // The object asked for, and a list, pass.
      expect(await misdirected.get(KubePath.of({ version: 'v1', namespace: 'team-b', resource: 'serviceaccounts', name: 'runlet-key-prod' }))).toMatchObject({ metadata: { uid: 'b' } });
      expect(await misdirected.list(accounts)).toMatchObject({ metadata: { name: 'runlet-key-prod' } });
    } finally {
      await close();
    }
  });

  it('accepts the object asked for, a subresource of it included', async () => {
    await api.create<KubeObject>(configMaps, { metadata: { name: 'mine' } });
    expect(await api.get(configMaps.named('mine'))).toMatchObject({ metadata: { name: 'mine', namespace: 'default' } });
    await api.create(KubePath.of({ group: 'apps', version: 'v1', namespace: 'default', resource: 'deployments' }), {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'web' },
      spec: { selector: { matchLabels: { app: 'web' } }, template: { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'web', image: 'web' }] } } },
    } as KubeObject);
    expect(await api.get(resourcePath({ apiVersion: 'apps/v1', kind: 'Deployment', namespace: 'default', name: 'web' }, 'scale'))).toMatchObject({ kind: 'Scale' });
  });
});

describe('resourcePath', () => {
  it("guesses plurals as client-go does, and builds namespaced, cluster and status paths", () => {
    expect(['App', 'RunLog', 'Ingress', 'NetworkPolicy', 'Lease', 'ConfigMap', 'Endpoints'].map(pluralOf)).toEqual(['apps', 'runlogs', 'ingresses', 'networkpolicies', 'leases', 'configmaps', 'endpoints']);
    expect(resourcePath({ apiVersion: 'apps/v1', kind: 'Deployment', namespace: 'team a', name: 'web' }).toString()).toBe('/apis/apps/v1/namespaces/team%20a/deployments/web');
    expect(resourcePath({ apiVersion: 'v1', kind: 'Namespace', name: 'team' }).toString()).toBe('/api/v1/namespaces/team');
    expect(resourcePath({ apiVersion: 'runlet.dev/v1alpha1', kind: 'App', namespace: 'team', name: 'hello' }, 'status').toString()).toBe('/apis/runlet.dev/v1alpha1/namespaces/team/apps/hello/status');
  });
});
