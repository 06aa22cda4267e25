// The test kube-proxy against the fake API server: connections follow the Service's EndpointSlices as they change,
// to what the pod network says an address stands for — a pod's local port, a server on the loopback — and an
// address the network does not know is not dialled.
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeApi } from '../../kube/client.ts';
import { kubeConfigCredentials } from '../../kube/kubeconfig.ts';
import { startKubeApiServer, type KubeApiServer } from '../kube/index.ts';
import { startKubeProxy, type EndpointSliceObject, type KubeProxy } from './kube-proxy.ts';
import { PodNetwork } from './pod-network.ts';
import { kubePathOf } from '../support/kube-path.ts';

let server: KubeApiServer;
let api: KubeApi;
const listeners: Server[] = [];

/** An HTTP server answering its name, on an ephemeral loopback port. */
async function named(name: string): Promise<number> {
  const http = createServer((_req, res) => res.end(name));
  listeners.push(http);
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  return (http.address() as AddressInfo).port;
}

function get(url: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (chunk: string) => (body += chunk)).on('end', () => resolve(body));
    });
    req.on('error', reject).end();
  });
}

beforeAll(async () => {
  server = await startKubeApiServer();
  api = new KubeApi(kubeConfigCredentials(server.kubeConfig()), { fieldManager: 'test' });
});

afterAll(async () => {
  await api.close();
  await server.close();
  for (const http of listeners) http.close();
});

describe('test kube-proxy', () => {
  it('routes each new connection to the current EndpointSlices: a server standing for a pod, then a pod of the kubelet; an unknown address is not dialled', async () => {
    const holderPort = await named('holder');
    const podLocalPort = await named('pod');
    const network = new PodNetwork();
    const holderIp = network.assignLoopbackServer('the holder');
    const podIp = network.assign('pod web-1', { localPort: (port) => (port === 8080 ? podLocalPort : -1) });
    const slice = (name: string, endpoints: EndpointSliceObject['endpoints'], port: number): EndpointSliceObject => ({
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name, namespace: 'default', labels: { 'kubernetes.io/service-name': 'web' } },
      addressType: 'IPv4',
      endpoints,
      ports: [{ name: 'http', port }],
    });
    const proxy: KubeProxy = await startKubeProxy({ kubeConfig: server.kubeConfig(), network, namespace: 'default', service: 'web' });
    try {
      await api.apply(slice('web-holder', [{ addresses: [holderIp] }], holderPort));
      // Another Service's slice is not this one's.
      await api.apply({ ...slice('other', [{ addresses: [podIp] }], 8080), metadata: { name: 'other', namespace: 'default', labels: { 'kubernetes.io/service-name': 'other' } } });
      expect(await get(proxy.url)).toBe('holder');

      await api.delete(kubePathOf('/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/web-holder'));
      await api.apply(slice('web-pods', [{ addresses: [podIp], conditions: { ready: true }, targetRef: { kind: 'Pod', name: 'web-1', namespace: 'default' } }, { addresses: [holderIp], conditions: { ready: false } }], 8080));
      expect(await get(proxy.url)).toBe('pod');
      expect(await get(proxy.url), 'an endpoint not ready gets nothing').toBe('pod');
      expect(proxy.routes).toEqual([`${holderIp}:${holderPort}`, 'pod/web-1', 'pod/web-1']);

      // A pod gone from the network (its address released): the connection fails, nothing is dialled.
      network.release(podIp);
      await expect(get(proxy.url)).rejects.toThrow();
      expect(proxy.routes).toHaveLength(3);

      await api.apply(slice('web-pods', [], 8080));
      await expect(get(proxy.url)).rejects.toThrow();
    } finally {
      await proxy.close();
    }
  });
});
