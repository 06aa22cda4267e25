import { afterEach, describe, expect, it } from 'vitest';
import { KubeApi } from '../../kube/client.ts';
import type { KubeObject } from '../../kube/objects.ts';
import { startKubeApiServer, type KubeApiServer } from '../../test/kube/index.ts';
import { testLogger } from '../../test/support/logger.ts';
import { waitFor } from '../../test/support/wait.ts';
import type { HolderAddress } from './endpoints.ts';
import { watchHolderEndpoints } from './holder-endpoints.ts';
import { kubePathOf } from '../../test/support/kube-path.ts';

const ENDPOINTS = '/api/v1/namespaces/runlet-system/endpoints';

function endpoints(name: string, ips: string[], port = 8090): KubeObject {
  return { apiVersion: 'v1', kind: 'Endpoints', metadata: { name, namespace: 'runlet-system' }, subsets: ips.length === 0 ? [] : [{ addresses: ips.map((ip) => ({ ip })), ports: [{ name: 'holder', port }] }] } as KubeObject;
}

describe('the watch of the holder Service’s Endpoints', () => {
  let server: KubeApiServer | undefined;
  let api: KubeApi | undefined;
  let stop: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await stop?.();
    await api?.close();
    await server?.close();
  });

  it('tells each change of the holder’s addresses, once, and nothing of other Endpoints or of rewrites that keep them', async () => {
    server = await startKubeApiServer({ namespaces: ['runlet-system'] });
    api = new KubeApi(await server.credentials(), { fieldManager: 'test' });
    const changes: HolderAddress[][] = [];
    const watch = watchHolderEndpoints({ api, service: { namespace: 'runlet-system', name: 'runlet-holder' }, logger: testLogger(), watchdogMs: 60_000, onChange: (addresses) => changes.push(addresses) });
    stop = () => watch.stop();
    watch.start();
    await watch.whenSynced();
    expect(changes, 'no Endpoints yet').toEqual([]);

    await api.create(kubePathOf(ENDPOINTS), endpoints('runlet-holder', ['10.0.0.2']));
    await waitFor(() => changes.length === 1, { what: 'the first addresses' });
    expect(changes[0]).toEqual([{ ip: '10.0.0.2', port: 8090 }]);

    // Another Service's Endpoints, and the holder's rewritten with the same addresses in another order.
    await api.create(kubePathOf(ENDPOINTS), endpoints('runlet-operator', ['10.0.0.9']));
    await api.apply(endpoints('runlet-holder', ['10.0.0.3', '10.0.0.2']));
    await waitFor(() => changes.length === 2, { what: 'the second operator pod' });
    await api.apply({ ...endpoints('runlet-holder', ['10.0.0.2', '10.0.0.3']), metadata: { name: 'runlet-holder', namespace: 'runlet-system', annotations: { touched: 'yes' } } } as KubeObject);
    await api.delete(kubePathOf(`${ENDPOINTS}/runlet-holder`));
    await waitFor(() => changes.length === 3, { what: 'the Endpoints gone' });
    expect(changes).toEqual([[{ ip: '10.0.0.2', port: 8090 }], [{ ip: '10.0.0.2', port: 8090 }, { ip: '10.0.0.3', port: 8090 }], []]);
  });
});
