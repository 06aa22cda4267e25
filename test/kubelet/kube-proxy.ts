// A kube-proxy for tests: one local port standing for a Service's port, each new connection sent where the
// Service's EndpointSlices (discovery.k8s.io v1, or v1beta1 on servers before 1.21, as the real kube-proxy reads
// them) say at that moment. Their addresses are those of the test pod network (pod-network.ts): a pod's, or one
// standing for a server of this machine (the holder); the network says which loopback port each stands for, and
// no other address is dialled. Like kube-proxy, it routes connections, not requests: a kept-alive connection
// stays with the endpoint it was opened to.
import { createConnection, createServer, type AddressInfo, type Socket } from 'node:net';
import type { KubeConfig } from '@kubernetes/client-node';
import { KubeApi } from '../../kube/client.ts';
import { kubeConfigCredentials } from '../../kube/kubeconfig.ts';
import type { KubeObject } from '../../kube/objects.ts';
import type { DialTarget, PodNetwork } from './pod-network.ts';
import { kubePathOf } from '../support/kube-path.ts';

export interface EndpointSliceObject extends KubeObject {
  addressType?: string;
  endpoints?: { addresses: string[]; conditions?: { ready?: boolean }; targetRef?: { kind?: string; name?: string; namespace?: string } }[];
  ports?: { name?: string; port?: number }[];
}

export interface KubeProxyOptions {
  kubeConfig: KubeConfig;
  /** The test kubelet's pod network: where a connection to an endpoint address goes. */
  network: Pick<PodNetwork, 'dialTarget'>;
  namespace: string;
  service: string;
  /** The Service port's name, matched against the slices' port names. Default `http`. */
  portName?: string;
}

export interface KubeProxy {
  /** `http://127.0.0.1:<port>`: the Service's address for callers. */
  readonly url: string;
  /** Where each connection went, in order: `pod/<name>` or `<ip>:<port>`. */
  readonly routes: readonly string[];
  /** Where a connection may go now: the ready endpoints of the Service's slices. */
  endpoints(): Promise<Endpoint[]>;
  close(): Promise<void>;
}

export interface Endpoint {
  /** `pod/<name>` for a pod's address, else `<ip>:<port>`. */
  label: string;
  ip: string;
  port: number;
}

/** The ready endpoints of the slices on the port named `portName` (or a slice's only port), in order. */
export function endpointsOf(slices: readonly EndpointSliceObject[], portName: string): Endpoint[] {
  const candidates: Endpoint[] = [];
  for (const slice of slices) {
    const port = slice.ports?.find((candidate) => (candidate.name ?? '') === portName) ?? (slice.ports?.length === 1 ? slice.ports[0] : undefined);
    if (port?.port === undefined) continue;
    for (const endpoint of slice.endpoints ?? []) {
      // As kube-proxy: an endpoint whose readiness is not stated is ready.
      if (endpoint.conditions?.ready === false) continue;
      const ref = endpoint.targetRef;
      for (const ip of endpoint.addresses) candidates.push({ label: ref?.kind === 'Pod' && ref.name !== undefined ? `pod/${ref.name}` : `${ip}:${port.port}`, ip, port: port.port });
    }
  }
  return candidates;
}

/** The endpoint a new connection goes to: the ready addresses in turn, null when there is none. */
export function chooseEndpoint(slices: readonly EndpointSliceObject[], portName: string, turn: number): Endpoint | null {
  const candidates = endpointsOf(slices, portName);
  return candidates.length === 0 ? null : candidates[turn % candidates.length]!;
}

/** The EndpointSlice API the server serves (v1 preferred), as a path prefix: `/apis/discovery.k8s.io/v1`. */
async function slicesRoot(api: KubeApi): Promise<string> {
  const group = (await api.get(kubePathOf('/apis/discovery.k8s.io'))) as { versions?: { groupVersion?: string }[] };
  const served = (group.versions ?? []).map((version) => version.groupVersion);
  const chosen = ['discovery.k8s.io/v1', 'discovery.k8s.io/v1beta1'].find((version) => served.includes(version));
  if (chosen === undefined) throw new Error(`the API server serves no EndpointSlices (discovery.k8s.io versions: ${served.join(', ')})`);
  return `/apis/${chosen}`;
}


export async function startKubeProxy(options: KubeProxyOptions): Promise<KubeProxy> {
  const api = new KubeApi(kubeConfigCredentials(options.kubeConfig));
  const portName = options.portName ?? 'http';
  let root: Promise<string> | undefined;
  // The Service's EndpointSlices, as kube-proxy finds them: by their `kubernetes.io/service-name` label.
  async function slices(): Promise<EndpointSliceObject[]> {
    root ??= slicesRoot(api);
    const path = `${await root}/namespaces/${encodeURIComponent(options.namespace)}/endpointslices`;
    return (await api.list<EndpointSliceObject>(kubePathOf(path), { labelSelector: `kubernetes.io/service-name=${options.service}` })).items;
  }
  const routes: string[] = [];
  const open = new Set<Socket>();
  let turn = 0;

  async function route(client: Socket): Promise<void> {
    const chosen = chooseEndpoint(await slices(), portName, turn++);
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
    endpoints: async () => endpointsOf(await slices(), portName),
    async close() {
      for (const socket of open) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await api.close();
    },
  };
}
