// The kubelet's Node on a real API server: registered Ready with room for many pods, so the scheduler binds
// pods to it, and kept alive with a Lease in kube-node-lease renewed every few seconds, so the node lifecycle
// controller neither marks it NotReady nor evicts its pods. (The fake API server has no scheduler and no
// node controller: there the kubelet binds pods itself and registers nothing.)
import {
  ApiException,
  CoordinationV1Api,
  CoreV1Api,
  PatchStrategy,
  setHeaderOptions,
  V1MicroTime,
  type KubeConfig,
  type V1Lease,
  type V1Node,
} from '@kubernetes/client-node';
import { LOCAL_IP } from './env.ts';
import type { LogFile } from './log-file.ts';

const LEASE_NAMESPACE = 'kube-node-lease';
/** As a real kubelet: the lease lasts 40 s and is renewed every quarter of that. */
const LEASE_DURATION_SECONDS = 40;
const RENEW_INTERVAL_MS = 10_000;
const MERGE_PATCH = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

function isNotFound(error: unknown): boolean {
  return error instanceof ApiException && error.code === 404;
}

function nodeObject(name: string): V1Node {
  const now = new Date();
  const capacity = { cpu: '64', memory: '256Gi', pods: '250', 'ephemeral-storage': '100Gi' };
  const condition = (type: string, status: string, reason: string) => ({ type, status, reason, lastHeartbeatTime: now, lastTransitionTime: now });
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name, labels: { 'kubernetes.io/hostname': name, 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': 'amd64' } },
    spec: {},
    status: {
      capacity,
      allocatable: capacity,
      addresses: [
        { type: 'InternalIP', address: LOCAL_IP },
        { type: 'Hostname', address: name },
      ],
      conditions: [
        condition('Ready', 'True', 'KubeletReady'),
        condition('MemoryPressure', 'False', 'KubeletHasSufficientMemory'),
        condition('DiskPressure', 'False', 'KubeletHasNoDiskPressure'),
        condition('PIDPressure', 'False', 'KubeletHasSufficientPID'),
      ],
      nodeInfo: {
        architecture: 'amd64',
        operatingSystem: 'linux',
        // It runs native sidecars (pod-runner.ts) as a 1.29 kubelet does: the operator's `nativeSidecars: auto`
        // reads this (operator/sidecar-mode.ts); the suffix says which kubelet it really is.
        kubeletVersion: 'v1.29.0-runlet-test-kubelet',
        kubeProxyVersion: '',
        containerRuntimeVersion: 'local-process://0',
        bootID: '',
        kernelVersion: '',
        machineID: '',
        osImage: '',
        systemUUID: '',
      },
    },
  };
}

export class NodeRegistration {
  readonly #name: string;
  readonly #core: CoreV1Api;
  readonly #coordination: CoordinationV1Api;
  readonly #log: LogFile;
  #timer: NodeJS.Timeout | undefined;

  constructor(config: KubeConfig, name: string, log: LogFile) {
    this.#name = name;
    this.#core = config.makeApiClient(CoreV1Api);
    this.#coordination = config.makeApiClient(CoordinationV1Api);
    this.#log = log;
  }

  /** Creates (or replaces, after an earlier run) the Node and its Lease, then renews the Lease. */
  async start(): Promise<void> {
    try {
      await this.#core.deleteNode({ name: this.#name });
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
    const node = await this.#core.createNode({ body: nodeObject(this.#name) });
    await this.#renew();
    this.#log.event(`registered node ${this.#name} (uid ${node.metadata?.uid})`);
    this.#timer = setInterval(() => {
      this.#renew().catch((error: unknown) => this.#log.error(`renewing the lease of node ${this.#name} failed`, error));
    }, RENEW_INTERVAL_MS);
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  async #renew(): Promise<void> {
    const spec = { holderIdentity: this.#name, leaseDurationSeconds: LEASE_DURATION_SECONDS, renewTime: new V1MicroTime() };
    try {
      await this.#coordination.patchNamespacedLease({ name: this.#name, namespace: LEASE_NAMESPACE, body: { spec } }, MERGE_PATCH);
    } catch (error) {
      if (!isNotFound(error)) throw error;
      const lease: V1Lease = { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: this.#name, namespace: LEASE_NAMESPACE }, spec };
      await this.#coordination.createNamespacedLease({ namespace: LEASE_NAMESPACE, body: lease });
    }
  }
}
