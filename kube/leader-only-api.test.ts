import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startKubeApiServer, type KubeApiServer } from '../test/kube/index.ts';
import { LeaderOnlyApi, NotLeaderError } from './leader-only-api.ts';
import { resourcePath, type KubeObject } from './objects.ts';

let server: KubeApiServer;
let api: LeaderOnlyApi;
let leading = true;

beforeEach(async () => {
  server = await startKubeApiServer();
  leading = true;
  api = new LeaderOnlyApi(await server.credentials(), { fieldManager: 'leader-only-test' }, () => leading);
});

afterEach(async () => {
  await api.close();
  await server.close();
});

const configMaps = resourcePath({ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'default' });

describe('LeaderOnlyApi', () => {
  it('writes while leading; once not, refuses every write before it reaches the server, and still reads', async () => {
    const created = await api.create<KubeObject>(configMaps, { metadata: { name: 'state' } });
    leading = false;
    const before = server.requests.length;
    const writes = [
      api.create<KubeObject>(configMaps, { metadata: { name: 'late' } }),
      api.replace(configMaps.named('state'), created),
      api.apply({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'state', namespace: 'default' } }),
      api.mergePatch(configMaps.named('state'), { data: { a: 'b' } }),
      api.delete(configMaps.named('state')),
    ];
    for (const outcome of await Promise.allSettled(writes)) {
      expect(outcome.status).toBe('rejected');
      expect((outcome as PromiseRejectedResult).reason).toBeInstanceOf(NotLeaderError);
    }
    expect(server.requests.length).toBe(before);
    expect(await api.get(configMaps.named('state'))).toMatchObject({ metadata: { name: 'state' } });

    leading = true;
    await api.mergePatch(configMaps.named('state'), { data: { a: 'b' } });
    expect(await api.get(configMaps.named('state'))).toMatchObject({ data: { a: 'b' } });
  });
});
