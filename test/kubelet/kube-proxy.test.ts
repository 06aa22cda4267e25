// The test kube-proxy against the fake API server: connections follow the Service's Endpoints as they change,
// to a pod's local port (targetRef) or to a plain address.
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeApi } from '../../kube/client.ts';
import { kubeConfigCredentials } from '../../kube/kubeconfig.ts';
import { startKubeApiServer, type KubeApiServer } from '../kube/index.ts';
import { startKubeProxy, type EndpointsObject, type KubeProxy } from './kube-proxy.ts';

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
  it('routes each new connection to the current Endpoints: a plain address, then a pod of the kubelet', async () => {
    const holderPort = await named('holder');
    const podLocalPort = await named('pod');
    const pods = { pod: (name: string) => (name === 'web-1' ? { localPort: (port: number) => (port === 8080 ? podLocalPort : -1) } : undefined) };
    const endpoints = (subsets: EndpointsObject['subsets']): EndpointsObject => ({ apiVersion: 'v1', kind: 'Endpoints', metadata: { name: 'web', namespace: 'default' }, subsets });
    const proxy: KubeProxy = await startKubeProxy({ kubeConfig: server.kubeConfig(), pods, namespace: 'default', service: 'web' });
    try {
      await api.apply(endpoints([{ addresses: [{ ip: '127.0.0.1' }], ports: [{ name: 'http', port: holderPort }] }]));
      expect(await get(proxy.url)).toBe('holder');

      await api.apply(endpoints([{ addresses: [{ ip: '127.0.0.1', targetRef: { kind: 'Pod', name: 'web-1', namespace: 'default' } }], ports: [{ name: 'http', port: 8080 }] }]));
      expect(await get(proxy.url)).toBe('pod');
      expect(proxy.routes).toEqual([`127.0.0.1:${holderPort}`, 'pod/web-1']);

      await api.apply(endpoints([]));
      await expect(get(proxy.url)).rejects.toThrow();
    } finally {
      await proxy.close();
    }
  });
});
