import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { KubeApi } from '../../kube/client.ts';
import type { KubeObject } from '../../kube/objects.ts';
import { startKubeApiServer, type KubeApiServer } from '../../test/kube/index.ts';
import { ensureHolderKey, holderKeysFor, namespaceHolderKey, readHolderKeyWhenMade } from './holder-key.ts';
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
    await expect(stopped).rejects.toThrow('stopped while waiting for the holder key Secret runlet-system/runlet-holder-key');
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
  const key = randomBytes(32);

  it("is its own, derived from the operator's: another namespace's key, or the operator's, is not it", () => {
    const keys = holderKeysFor(key, WHERE);
    const teamA = Buffer.from(keys('team-a'));
    expect(teamA).toHaveLength(32);
    expect(teamA.equals(Buffer.from(keys('team-b')))).toBe(false);
    expect(teamA.equals(key)).toBe(false);
    expect(teamA.equals(Buffer.from(namespaceHolderKey(key, 'team-a')))).toBe(true);
    expect(teamA.equals(Buffer.from(holderKeysFor(randomBytes(32), WHERE)('team-a')))).toBe(false);
  });

  it("is the operator's own in the operator's namespace, whose Apps read the operator's Secret itself", () => {
    expect(Buffer.from(holderKeysFor(key, WHERE)('runlet-system')).equals(key)).toBe(true);
    expect(Buffer.from(holderKeysFor(key, { ...WHERE, name: 'my-key' })('runlet-system')).equals(key)).toBe(false);
  });
});
