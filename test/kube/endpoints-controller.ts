// The endpoints controller of kube-controller-manager (pkg/controller/endpoint, as of Kubernetes 1.20), the one
// controller this server runs besides garbage collection: every Service with a selector has core/v1 Endpoints of
// its name, listing the pods its selector matches — ready ones in `addresses`, the others in `notReadyAddresses`
// (all in `addresses` with `publishNotReadyAddresses`) — each with its IP, node and a `targetRef` to the pod, on
// the Service's ports resolved to the pod's (a named targetPort by the containers' port names). Pods without an
// IP, terminal pods (Succeeded, or Failed unless restarted Always) and pods being deleted are left out, as 1.20
// leaves them out. The Endpoints carry the Service's labels, plus `service.kubernetes.io/headless` for a headless
// one, and go with the Service. A Service without a selector is left alone: its Endpoints are whoever's writes
// them.
//
// Like the real controller it acts after the write that changed a Service or a pod, not within it (a microtask
// later), so a watch sees the pod's event before the Endpoints'. Simplified: no hostname/subdomain records, no
// `endpoints.kubernetes.io/last-change-trigger-time` annotation, no cap of 1,000 addresses, every selecting
// Service of a namespace re-synced on any pod change there.
import type { ObjectLifecycle, WriteOptions } from './lifecycle.ts';
import type { ResourceRegistry, ResourceType } from './resources.ts';
import type { ObjectStore, StoreEvent } from './store.ts';
import { deepEqual, type KubeObject } from './types.ts';

const CONTROLLER_WRITE: WriteOptions = { manager: 'kube-controller-manager', dryRun: false };
const HEADLESS_LABEL = 'service.kubernetes.io/headless';

interface ServicePort {
  name?: string;
  port: number;
  targetPort?: number | string;
  protocol?: string;
}

interface ServiceSpec {
  selector?: Record<string, string>;
  clusterIP?: string;
  publishNotReadyAddresses?: boolean;
  ports?: ServicePort[];
}

interface PodShape {
  metadata: { name?: string; namespace?: string; uid?: string; resourceVersion?: string; labels?: Record<string, string>; deletionTimestamp?: string };
  spec?: { nodeName?: string; restartPolicy?: string; containers?: { ports?: { name?: string; containerPort: number; protocol?: string }[] }[] };
  status?: { podIP?: string; phase?: string; conditions?: { type: string; status: string }[] };
}

interface EndpointAddress {
  ip: string;
  nodeName?: string;
  targetRef: { kind: 'Pod'; namespace: string; name: string; uid?: string; resourceVersion?: string };
}

interface EndpointSubset {
  addresses?: EndpointAddress[];
  notReadyAddresses?: EndpointAddress[];
  ports?: { name?: string; port: number; protocol: string }[];
}

export class EndpointsController {
  readonly #store: ObjectStore;
  readonly #lifecycle: ObjectLifecycle;
  readonly #endpoints: ResourceType;
  /** Namespaces whose selecting Services are to be synced at the next microtask. */
  readonly #dirty = new Set<string>();
  readonly #unsubscribe: () => void;
  #stopped = false;

  constructor(store: ObjectStore, lifecycle: ObjectLifecycle, registry: ResourceRegistry) {
    this.#store = store;
    this.#lifecycle = lifecycle;
    this.#endpoints = registry.find('', 'v1', 'endpoints')!;
    this.#unsubscribe = store.subscribe((event) => this.#observe(event));
  }

  stop(): void {
    this.#stopped = true;
    this.#unsubscribe();
  }

  #observe(event: StoreEvent): void {
    if (event.key !== 'services' && event.key !== 'pods') return;
    const namespace = event.object.metadata.namespace;
    if (namespace === undefined) return;
    if (event.key === 'services' && event.type === 'DELETED') {
      this.#removeEndpointsOf(event.previous ?? event.object);
      return;
    }
    if (this.#dirty.size === 0) queueMicrotask(() => this.#syncDirty());
    this.#dirty.add(namespace);
  }

  #syncDirty(): void {
    const namespaces = [...this.#dirty];
    this.#dirty.clear();
    if (this.#stopped) return;
    for (const namespace of namespaces) {
      const pods = this.#store.list('pods', namespace) as unknown as PodShape[];
      for (const service of this.#store.list('services', namespace)) this.#sync(service, pods);
    }
  }

  /** Writes the Endpoints of `service` from `pods` (its namespace's), when it has a selector. */
  #sync(service: KubeObject, pods: readonly PodShape[]): void {
    const spec = (service.spec ?? {}) as ServiceSpec;
    if (spec.selector === undefined || spec.selector === null) return;
    const selector = spec.selector;
    const namespace = service.metadata.namespace!;
    const name = service.metadata.name!;
    const tolerateUnready = spec.publishNotReadyAddresses === true;
    const selected = Object.keys(selector).length === 0 ? [] : pods.filter((pod) => Object.entries(selector).every(([key, value]) => pod.metadata.labels?.[key] === value));
    const subsets: EndpointSubset[] = [];
    for (const pod of selected) {
      if (!inEndpoints(pod, tolerateUnready)) continue;
      const address: EndpointAddress = {
        ip: pod.status!.podIP!,
        ...(pod.spec?.nodeName === undefined ? {} : { nodeName: pod.spec.nodeName }),
        targetRef: { kind: 'Pod', namespace, name: pod.metadata.name!, uid: pod.metadata.uid, resourceVersion: pod.metadata.resourceVersion },
      };
      const ready = tolerateUnready || isReady(pod);
      const ports = spec.ports ?? [];
      if (ports.length === 0) {
        if (spec.clusterIP === 'None') subsets.push(ready ? { addresses: [address] } : { notReadyAddresses: [address] });
        continue;
      }
      for (const servicePort of ports) {
        const port = podPort(pod, servicePort);
        if (port === undefined) continue;
        const endpointPort = { ...(servicePort.name === undefined ? {} : { name: servicePort.name }), port, protocol: servicePort.protocol ?? 'TCP' };
        subsets.push(ready ? { addresses: [address], ports: [endpointPort] } : { notReadyAddresses: [address], ports: [endpointPort] });
      }
    }
    const labels = { ...(service.metadata.labels as Record<string, string> | undefined) };
    if (spec.clusterIP === 'None') labels[HEADLESS_LABEL] = '';
    else delete labels[HEADLESS_LABEL];
    const wanted: KubeObject = {
      apiVersion: 'v1',
      kind: 'Endpoints',
      metadata: { name, namespace, ...(Object.keys(labels).length === 0 ? {} : { labels }) },
      ...(subsets.length === 0 ? {} : { subsets: repack(subsets) }),
    };
    const existing = this.#store.get('endpoints', namespace, name);
    try {
      if (existing === undefined) {
        this.#lifecycle.create(this.#endpoints, namespace, wanted, CONTROLLER_WRITE);
      } else if (!deepEqual(existing.subsets, wanted.subsets) || !deepEqual(existing.metadata.labels, wanted.metadata.labels)) {
        const metadata = { ...existing.metadata, labels: wanted.metadata.labels };
        this.#lifecycle.replace(this.#endpoints, namespace, name, { ...wanted, metadata }, undefined, CONTROLLER_WRITE);
      }
    } catch {
      // Refused (a namespace terminating, an address the API server does not take): the real controller logs,
      // retries with backoff, and the Endpoints stay as they were; here the next change of the namespace retries.
    }
  }

  #removeEndpointsOf(service: KubeObject): void {
    const { namespace, name } = service.metadata;
    if (this.#store.get('endpoints', namespace, name!) === undefined) return;
    queueMicrotask(() => {
      if (this.#stopped || this.#store.get('services', namespace, name!) !== undefined) return;
      try {
        this.#lifecycle.delete(this.#endpoints, namespace, name!, { propagationPolicy: undefined, preconditions: undefined });
      } catch {
        // Gone already.
      }
    });
  }
}

/** 1.20's ShouldPodBeInEndpoints, and its skip of pods being deleted unless unready ones are published. */
function inEndpoints(pod: PodShape, tolerateUnready: boolean): boolean {
  if (!pod.status?.podIP) return false;
  if (!tolerateUnready && pod.metadata.deletionTimestamp !== undefined) return false;
  const phase = pod.status.phase;
  const restartPolicy = pod.spec?.restartPolicy ?? 'Always';
  if (restartPolicy === 'Never') return phase !== 'Failed' && phase !== 'Succeeded';
  if (restartPolicy === 'OnFailure') return phase !== 'Succeeded';
  return true;
}

function isReady(pod: PodShape): boolean {
  return (pod.status?.conditions ?? []).some((condition) => condition.type === 'Ready' && condition.status === 'True');
}

/** podutil.FindPort: a number as it is; a name looked up among the containers' ports of the same protocol. */
function podPort(pod: PodShape, servicePort: ServicePort): number | undefined {
  const target = servicePort.targetPort ?? servicePort.port;
  if (typeof target === 'number') return target;
  if (/^\d+$/.test(target)) return Number(target);
  const protocol = servicePort.protocol ?? 'TCP';
  for (const container of pod.spec?.containers ?? []) {
    for (const port of container.ports ?? []) if (port.name === target && (port.protocol ?? 'TCP') === protocol) return port.containerPort;
  }
  return undefined;
}

/** endpoints.RepackSubsets: one subset per set of ports, its addresses sorted by IP (then pod name). */
function repack(subsets: readonly EndpointSubset[]): EndpointSubset[] {
  const byPorts = new Map<string, { ports: EndpointSubset['ports']; ready: Map<string, EndpointAddress>; notReady: Map<string, EndpointAddress> }>();
  for (const subset of subsets) {
    const key = JSON.stringify(subset.ports ?? []);
    let group = byPorts.get(key);
    if (group === undefined) byPorts.set(key, (group = { ports: subset.ports, ready: new Map(), notReady: new Map() }));
    for (const address of subset.addresses ?? []) group.ready.set(addressKey(address), address);
    for (const address of subset.notReadyAddresses ?? []) group.notReady.set(addressKey(address), address);
  }
  const sorted = (addresses: Map<string, EndpointAddress>) => [...addresses.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, address]) => address);
  return [...byPorts.values()].map((group) => ({
    ...(group.ready.size === 0 ? {} : { addresses: sorted(group.ready) }),
    ...(group.notReady.size === 0 ? {} : { notReadyAddresses: sorted(group.notReady) }),
    ...(group.ports === undefined || group.ports.length === 0 ? {} : { ports: group.ports }),
  }));
}

function addressKey(address: EndpointAddress): string {
  return `${address.ip}/${address.targetRef.name}`;
}
