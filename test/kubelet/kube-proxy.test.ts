// The test kube-proxy against the fake API server: connections follow the Service's Endpoints as they change,
// to what the pod network says an address stands for — a pod's local port, a server on the loopback — and an
// address the network does not know is not dialled.
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeApi } from '../../kube/client.ts';
import { kubeConfigCredentials } from '../../kube/kubeconfig.ts';
import { startKubeApiServer, type KubeApiServer } from '../kube/index.ts';
import { startKubeProxy, type EndpointsObject, type KubeProxy } from './kube-proxy.ts';
import { PodNetwork } from './pod-network.ts';

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
  it('routes each new connection to the current Endpoints: a server standing for a pod, then a pod of the kubelet; an unknown address is not dialled', async () => {
    const holderPort = await named('holder');
    const podLocalPort = await named('pod');
    const network = new PodNetwork();
    const holderIp = network.assignLoopbackServer('the holder');
    const podIp = network.assign('pod web-1', { localPort: (port) => (port === 8080 ? podLocalPort : -1) });
    const endpoints = (subsets: EndpointsObject['subsets']): EndpointsObject => ({ apiVersion: 'v1', kind: 'Endpoints', metadata: { name: 'web', namespace: 'default' }, subsets });
    const proxy: KubeProxy = await startKubeProxy({ kubeConfig: server.kubeConfig(), network, namespace: 'default', service: 'web' });
    try {
      await api.apply(endpoints([{ addresses: [{ ip: holderIp }], ports: [{ name: 'http', port: holderPort }] }]));
      expect(await get(proxy.url)).toBe('holder');

      await api.apply(endpoints([{ addresses: [{ ip: podIp, targetRef: { kind: 'Pod', name: 'web-1', namespace: 'default' } }], ports: [{ name: 'http', port: 8080 }] }]));
      expect(await get(proxy.url)).toBe('pod');
      expect(proxy.routes).toEqual([`${holderIp}:${holderPort}`, 'pod/web-1']);

      // A pod gone from the network (its address released): the connection fails, nothing is dialled.
      network.release(podIp);
      await expect(get(proxy.url)).rejects.toThrow();
      expect(proxy.routes).toHaveLength(2);

      await api.apply(endpoints([]));
      await expect(get(proxy.url)).rejects.toThrow();
    } finally {
      await proxy.close();
    }
  });
});
