import type { V1Secret } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { KubeApi } from '../kube/client.ts';
import type { KubeObject } from '../kube/objects.ts';
import { startKubeApiServer, type KubeApiServer } from '../test/kube/index.ts';
import { pythonSpec, storedApp } from '../test/support/operator-apps.ts';
import { adminRequestSigned, signAdminRequest } from '../sidecar/admin-cancel.ts';
import { AdminKeys, KUBELET_REFRESH_MS, ROTATE_AFTER_MS } from './admin-keys.ts';
import { kubePathOf } from '../test/support/kube-path.ts';

const SECRET = (namespace: string) => `/api/v1/namespaces/${namespace}/secrets/runlet-admin-key`;

describe('the namespaces’ admin keys', () => {
  let server: KubeApiServer | undefined;
  let api: KubeApi | undefined;
  afterEach(async () => {
    await api?.close();
    await server?.close();
  });

  async function start(): Promise<{ api: KubeApi; clock: { now: number } }> {
    server = await startKubeApiServer({ namespaces: ['team-a', 'team-b'] });
    api = new KubeApi(await server.credentials(), { fieldManager: 'runlet-operator' });
    return { api, clock: { now: 1_700_000_000_000 } };
  }

  const entries = async (kube: KubeApi, namespace: string) => {
    const secret = await kube.get<V1Secret & KubeObject>(kubePathOf(SECRET(namespace)));
    const text = (name: string) => (secret.data?.[name] === undefined ? undefined : Buffer.from(secret.data[name], 'base64').toString('utf8'));
    return { current: text('current'), previous: text('previous'), owners: secret.metadata?.ownerReferences?.map((ref) => ref.uid) };
  };

  it('makes a random key per namespace, derived from nothing, owned by the namespace’s Apps; one namespace’s key signs nothing the other takes', async () => {
    const { api: kube, clock } = await start();
    const keys = new AdminKeys({ api: kube, now: () => clock.now });
    await keys.ensure('team-a', [storedApp(pythonSpec(), { namespace: 'team-a', uid: 'uid-a' })], true);
    await keys.ensure('team-b', [storedApp(pythonSpec(), { namespace: 'team-b', uid: 'uid-b' })], true);
    const a = await entries(kube, 'team-a');
    const b = await entries(kube, 'team-b');
    expect(a.current).toMatch(/^[0-9a-f]{64}$/);
    expect(b.current).not.toBe(a.current);
    expect([a.owners, b.owners]).toEqual([['uid-a'], ['uid-b']]);
    const signedByA = signAdminRequest(a.current!, 'POST', '/cancel/x', clock.now);
    expect(adminRequestSigned([b.current!], signedByA, 'POST', '/cancel/x', clock.now)).toBe(false);
    expect(adminRequestSigned([a.current!], signedByA, 'POST', '/cancel/x', clock.now)).toBe(true);
  });

  it('keeps the key across operators, rotates it when due (the old one kept as previous), and signs with the previous one until the kubelet has refreshed the pods’ files', async () => {
    const { api: kube, clock } = await start();
    const owners = [storedApp(pythonSpec(), { namespace: 'team-a', uid: 'uid-a' })];
    await new AdminKeys({ api: kube, now: () => clock.now }).ensure('team-a', owners, true);
    const first = await entries(kube, 'team-a');

    // Another operator (a restart, a new leader) keeps it.
    const keys = new AdminKeys({ api: kube, now: () => clock.now });
    await keys.ensure('team-a', owners, true);
    expect(await entries(kube, 'team-a')).toEqual(first);
    expect(await keys.signingKey('team-a')).toBe(first.current);
    const writes = () => server!.countRequests({ method: 'PATCH' });
    const before = writes();
    await keys.ensure('team-a', owners, false);
    expect(writes(), 'nothing sent while the key is not due').toBe(before);

    clock.now += ROTATE_AFTER_MS;
    await keys.ensure('team-a', owners, false);
    const rotated = await entries(kube, 'team-a');
    expect(rotated.previous).toBe(first.current);
    expect(rotated.current).not.toBe(first.current);
    expect(await keys.signingKey('team-a'), 'the sidecars may not have the new key yet').toBe(first.current);
    clock.now += KUBELET_REFRESH_MS;
    expect(await new AdminKeys({ api: kube, now: () => clock.now }).signingKey('team-a')).toBe(rotated.current);
  });

  it('has no key to sign with for a namespace without one', async () => {
    const { api: kube } = await start();
    expect(await new AdminKeys({ api: kube }).signingKey('team-b')).toBeUndefined();
  });
});
