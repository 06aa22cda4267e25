// A kube-proxy for tests: one local port standing for a Service's port, each new connection sent where the
// Service's core v1 Endpoints say at that moment. Their addresses are those of the test pod network
// (pod-network.ts): a pod's, or one standing for a server of this machine (the holder); the network says which
// loopback port each stands for, and no other address is dialled. Like kube-proxy, it routes connections,
// not requests: a kept-alive connection stays with the endpoint it was opened to.
import { createConnection, createServer, type AddressInfo, type Socket } from 'node:net';
import type { KubeConfig } from '@kubernetes/client-node';
import { KubeApi } from '../../kube/client.ts';
import { kubeConfigCredentials } from '../../kube/kubeconfig.ts';
import type { KubeObject } from '../../kube/objects.ts';
import type { DialTarget, PodNetwork } from './pod-network.ts';

interface EndpointAddress {
  ip: string;
  targetRef?: { kind?: string; name?: string; namespace?: string };
}

export interface EndpointsObject extends KubeObject {
  subsets?: { addresses?: EndpointAddress[]; ports?: { name?: string; port: number }[] }[];
}

export interface KubeProxyOptions {
  kubeConfig: KubeConfig;
  /** The test kubelet's pod network: where a connection to an endpoint address goes. */
  network: Pick<PodNetwork, 'dialTarget'>;
  namespace: string;
  service: string;
  /** The Service port's name, matched against the Endpoints' port names. Default `http`. */
  portName?: string;
}

export interface KubeProxy {
  /** `http://127.0.0.1:<port>`: the Service's address for callers. */
  readonly url: string;
  /** Where each connection went, in order: `pod/<name>` or `<ip>:<port>`. */
  readonly routes: readonly string[];
  close(): Promise<void>;
}

interface Endpoint {
  /** `pod/<name>` for a pod's address, else `<ip>:<port>`. */
  label: string;
  ip: string;
  port: number;
}

/** The endpoint a new connection goes to: the ready addresses in turn, null when there is none. */
export function chooseEndpoint(endpoints: EndpointsObject | undefined, portName: string, turn: number): Endpoint | null {
  const candidates: Endpoint[] = [];
  for (const subset of endpoints?.subsets ?? []) {
    const port = subset.ports?.find((candidate) => (candidate.name ?? '') === portName) ?? (subset.ports?.length === 1 ? subset.ports[0] : undefined);
    if (port === undefined) continue;
    for (const address of subset.addresses ?? []) {
      const ref = address.targetRef;
      const label = ref?.kind === 'Pod' && ref.name !== undefined ? `pod/${ref.name}` : `${address.ip}:${port.port}`;
      candidates.push({ label, ip: address.ip, port: port.port });
    }
  }
  return candidates.length === 0 ? null : candidates[turn % candidates.length]!;
}

export async function startKubeProxy(options: KubeProxyOptions): Promise<KubeProxy> {
  const api = new KubeApi(kubeConfigCredentials(options.kubeConfig));
  const path = `/api/v1/namespaces/${options.namespace}/endpoints/${options.service}`;
  const portName = options.portName ?? 'http';
  const routes: string[] = [];
  const open = new Set<Socket>();
  let turn = 0;

  async function route(client: Socket): Promise<void> {
    const chosen = chooseEndpoint(await api.find<EndpointsObject>(path), portName, turn++);
    if (chosen === null || client.destroyed) {
      // Real kube-proxy rejects connections to a Service without endpoints.
      client.destroy();
      return;
    }
    // Throws for an address no pod (nor stand-in) has: the connection fails, as to a vanished pod.
    const target: DialTarget = options.network.dialTarget(chosen.ip, chosen.port);
    routes.push(chosen.label);
    const upstream = createConnection(target);
    open.add(upstream);
    upstream.once('close', () => open.delete(upstream));
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
    client.pipe(upstream).pipe(client);
  }

  const server = createServer({ pauseOnConnect: true }, (client) => {
    open.add(client);
    client.once('close', () => open.delete(client));
    route(client).then(
      () => client.resume(),
      () => client.destroy(),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    routes,
    async close() {
      for (const socket of open) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await api.close();
    },
  };
}
