import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { KubeApi } from '../../kube/client.ts';
import type { KubeObject } from '../../kube/objects.ts';
import { startKubeApiServer, type KubeApiServer } from '../../test/kube/index.ts';
import { installCrds } from '../../test/operator/e2e-cluster.ts';
import { pythonSpec } from '../../test/support/operator-apps.ts';
import { renderHolderKeyCopy } from '../render/holder-key.ts';
import { ensureHolderKey, namespaceHolderKey, namespaceHolderKeys, readHolderKeyWhenMade, retireRootHolderKey } from './holder-key.ts';
import { kubePathOf } from '../../test/support/kube-path.ts';

const WHERE = { namespace: 'runlet-system', name: 'runlet-holder-key' };
const SECRETS = '/api/v1/namespaces/runlet-system/secrets';

describe('the holder key’s Secret', () => {
  let server: KubeApiServer | undefined;
  let api: KubeApi | undefined;
  afterEach(async () => {
    await api?.close();
    await server?.close();
  });

  async function start(): Promise<KubeApi> {
    server = await startKubeApiServer({ namespaces: ['runlet-system'] });
    api = new KubeApi(await server.credentials());
    return api;
  }

  it('is made with a random 32-byte key when missing, and read back as it is afterwards', async () => {
    const kube = await start();
    const key = await ensureHolderKey(kube, WHERE);
    expect(key).toHaveLength(32);
    const secret = await kube.get<KubeObject & { data?: Record<string, string> }>(kubePathOf(`${SECRETS}/runlet-holder-key`));
    expect(Buffer.from(secret.data!.key!, 'base64').toString('utf8')).toBe(Buffer.from(key).toString('hex'));
    expect(await ensureHolderKey(kube, WHERE)).toEqual(key);
    expect(server!.countRequests({ method: 'POST' })).toBe(1);
  });

  it('is waited for by an activator until the operator made it, and never made by it; a refused read is an error, not a wait', async () => {
    const kube = await start();
    let waiting = 0;
    const stop = new AbortController();
    const read = readHolderKeyWhenMade(kube, WHERE, { retryMs: 20, signal: stop.signal, onWaiting: () => (waiting += 1) });
    await server!.waitForRequest({ method: 'GET', pathPattern: /\/secrets\/runlet-holder-key$/ }, 5_000);
    const made = await ensureHolderKey(kube, WHERE);
    expect(await read).toEqual(made);
    expect(waiting, 'said once').toBe(1);
    expect(server!.countRequests({ method: 'POST' }), 'the one create is the operator’s').toBe(1);

    server!.failNext({ method: 'GET', pathPattern: '/secrets/runlet-holder-key', status: 403, message: 'secrets "runlet-holder-key" is forbidden' });
    await expect(readHolderKeyWhenMade(kube, WHERE, { retryMs: 20, signal: stop.signal, onWaiting: () => {} })).rejects.toThrow(/forbidden/);
    // Stopped while it waits: it ends, saying which Secret it waited for.
    await kube.delete(kubePathOf(`${SECRETS}/runlet-holder-key`));
    const stopped = readHolderKeyWhenMade(kube, WHERE, { retryMs: 60_000, signal: stop.signal, onWaiting: () => stop.abort() });
    await expect(stopped).rejects.toThrow('stopped while waiting for the holder control key Secret runlet-system/runlet-holder-key');
  });

  it('is one key for replicas that start together: the one whose create lost (409) reads the winner’s', async () => {
    const kube = await start();
    const keys = await Promise.all([ensureHolderKey(kube, WHERE), ensureHolderKey(kube, WHERE), ensureHolderKey(kube, WHERE)]);
    expect(keys[1]).toEqual(keys[0]);
    expect(keys[2]).toEqual(keys[0]);
  });

  it('keeps a key the cluster’s admin provided, and refuses one shorter than 32 bytes, naming the Secret', async () => {
    const kube = await start();
    const provided = 'a key chosen by the admin, longer than 32 bytes';
    await kube.create(kubePathOf(SECRETS), { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'runlet-holder-key' }, stringData: { key: provided } } as KubeObject);
    expect(Buffer.from(await ensureHolderKey(kube, WHERE)).toString('utf8')).toBe(provided);

    await kube.create(kubePathOf(SECRETS), { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'short' }, stringData: { key: 'too short' } } as KubeObject);
    await expect(ensureHolderKey(kube, { namespace: 'runlet-system', name: 'short' })).rejects.toThrow(/runlet-system\/short: RUNLET_HOLDER_KEY must hold at least 32 bytes/);
  });
});

describe("each App namespace's key", () => {
  let server: KubeApiServer | undefined;
  let api: KubeApi | undefined;
  afterEach(async () => {
    await api?.close();
    await server?.close();
  });

  async function start(): Promise<KubeApi> {
    server = await startKubeApiServer({ namespaces: ['runlet-system', 'team-a', 'team-b'] });
    // Apps, which the root's retirement looks for in the release namespace.
    await installCrds(server.kubeConfig());
    api = new KubeApi(await server.credentials());
    return api;
  }

  const putKey = (kube: KubeApi, namespace: string, key: Uint8Array, ownerReferences?: { apiVersion: string; kind: string; name: string; uid: string }[]) =>
    kube.create(kubePathOf(`/api/v1/namespaces/${namespace}/secrets`), { ...renderHolderKeyCopy(namespace, [], key), metadata: { name: 'runlet-holder-key', namespace, ...(ownerReferences === undefined ? {} : { ownerReferences }) } } as KubeObject);

  it('is random and its own, derived from nothing: a new one for each namespace without a key', async () => {
    const kube = await start();
    const [a, b, again] = await Promise.all([namespaceHolderKey(kube, 'team-a'), namespaceHolderKey(kube, 'team-b'), namespaceHolderKey(kube, 'team-a')]);
    expect(a).toHaveLength(32);
    expect(Buffer.from(a).equals(Buffer.from(b))).toBe(false);
    expect(Buffer.from(a).equals(Buffer.from(again)), 'nothing to derive it from: not the same twice').toBe(false);
  });

  it('is kept as the namespace has it: an earlier version’s derived key keeps working', async () => {
    const kube = await start();
    const derived = randomBytes(32);
    await putKey(kube, 'team-a', derived);
    expect(Buffer.from(await namespaceHolderKey(kube, 'team-a')).equals(derived)).toBe(true);
  });

  it('is read by the holder from that namespace’s Secret alone, and refused, saying so, while the namespace has none', async () => {
    const kube = await start();
    const teamA = randomBytes(32);
    await putKey(kube, 'team-a', teamA);
    const keys = namespaceHolderKeys(kube);
    expect(Buffer.from(await keys('team-a')).equals(teamA)).toBe(true);
    await expect(keys('team-b')).rejects.toThrow(/namespace team-b has no hand-over key yet/);
  });

  it('no longer has a root: an earlier version’s root key in the release namespace is deleted, not a key owned by Apps there, nor the control key', async () => {
    const kube = await start();
    const control = { namespace: 'runlet-system', name: 'runlet-holder-control' };
    await putKey(kube, 'runlet-system', randomBytes(32));
    expect(await retireRootHolderKey(kube, 'runlet-system', { ...control, name: 'runlet-holder-key' }), 'the control key itself').toBe(false);
    expect(await retireRootHolderKey(kube, 'runlet-system', control)).toBe(true);
    expect(await kube.find(kubePathOf('/api/v1/namespaces/runlet-system/secrets/runlet-holder-key'))).toBeUndefined();
    expect(await retireRootHolderKey(kube, 'runlet-system', control), 'nothing left to delete').toBe(false);
    await putKey(kube, 'runlet-system', randomBytes(32), [{ apiVersion: 'runlet.dev/v1alpha1', kind: 'App', name: 'own', uid: 'uid-own' }]);
    expect(await retireRootHolderKey(kube, 'runlet-system', control), 'the key of the release namespace’s own Apps').toBe(false);
  });

  it('is not deleted, as a root, while Apps live in the release namespace: their sidecars read it as their key', async () => {
    const kube = await start();
    await putKey(kube, 'runlet-system', randomBytes(32));
    await kube.create(kubePathOf('/apis/runlet.dev/v1alpha1/namespaces/runlet-system/apps'), { apiVersion: 'runlet.dev/v1alpha1', kind: 'App', metadata: { name: 'own' }, spec: pythonSpec() } as KubeObject);
    expect(await retireRootHolderKey(kube, 'runlet-system', { namespace: 'runlet-system', name: 'runlet-holder-control' })).toBe(false);
    expect(await kube.find(kubePathOf('/api/v1/namespaces/runlet-system/secrets/runlet-holder-key'))).toBeDefined();
  });
});
