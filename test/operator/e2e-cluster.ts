// What the operator end-to-end suite needs from a cluster, whichever kind runs it: the API server, a way to
// reach a pod's sidecar, a bearer token its run interface accepts, and whether a pod's processes are gone.
// Shared here: installing the CRDs from crds/*.yaml and running the operator in-process.
import { readdir, readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { ApiException, ApiextensionsV1Api, CoreV1Api, type KubeConfig, type V1CustomResourceDefinition, type V1Pod } from '@kubernetes/client-node';
import pino from 'pino';
import { parse as parseYaml } from 'yaml';
import { resolveConfig, type ConfigLayer } from '../../operator/config.ts';
import type { KubeApiServer } from '../kube/index.ts';
import { startOperator, type Operator, type OperatorHolderOptions, type OperatorOptions } from '../../operator/main.ts';
import { KubeApi } from '../../kube/client.ts';
import { kubeConfigCredentials } from '../../kube/kubeconfig.ts';
import type { KubeObject } from '../../kube/objects.ts';
import type { ImageTable, SidecarUrls } from '../kubelet/index.ts';

export const REPO = resolve(import.meta.dirname, '../..');

/** A Python runtime image in a private registry: the kubelet pulls it only with the pull secret E2E_PULL_SECRET. */
export const PRIVATE_PYTHON_IMAGE = 'registry.test/private/runlet-python:e2e';
/** The pull secret every App pod is rendered with (the operator's `imagePullSecrets`), in no namespace until a test makes it. */
export const E2E_PULL_SECRET = 'runlet-e2e-pull';

/** `images` plus PRIVATE_PYTHON_IMAGE: the image `pythonRuntime` stands for, behind E2E_PULL_SECRET. */
export function withPrivateImage(images: ImageTable, pythonRuntime: string): ImageTable {
  return { ...images, [PRIVATE_PYTHON_IMAGE]: { ...images[pythonRuntime]!, pullSecret: E2E_PULL_SECRET } };
}

export interface E2eCluster {
  /** Which cluster this is, for test names and messages. */
  readonly description: string;
  readonly kubeConfig: KubeConfig;
  /** Where the test reaches the sidecar of a running pod. */
  sidecar(pod: V1Pod): Promise<SidecarUrls>;
  /** A bearer token the sidecars of apps in `namespace` (the project) accept. */
  token(namespace: string): Promise<string>;
  /** Taken while the pod runs: then resolves to whether every one of its processes has stopped since. */
  stopCheck(pod: V1Pod): () => Promise<boolean>;
  /**
   * With a results store (PostgreSQL): the run as the store holds it, once collected. Absent: runs are kept in
   * the pods' RunLogs, where the suite reads them.
   */
  resultsRun?(namespace: string, app: string, runId: string): Promise<{ status: string } | undefined>;
  /**
   * From now on the API server refuses new pods in `namespace`, as a ResourceQuota of `pods: 0` does; resolves
   * to a word the refusal's message contains.
   */
  refusePods(namespace: string): Promise<string>;
  /** Logs for a failing test to print. */
  diagnostics(): string;
  close(): Promise<void>;
}

const NO_PODS_QUOTA = 'runlet-e2e-no-pods';

/** refusePods on a real API server: a ResourceQuota of no pods (its admission plugin is on by default). */
export async function createNoPodsQuota(kubeConfig: KubeConfig, namespace: string): Promise<string> {
  await kubeConfig.makeApiClient(CoreV1Api).createNamespacedResourceQuota({ namespace, body: { metadata: { name: NO_PODS_QUOTA }, spec: { hard: { pods: '0' } } } });
  return NO_PODS_QUOTA;
}

/** refusePods on the in-memory API server, which has no quotas: pod creates answered as the quota would answer them. */
export function refusePodsLikeQuota(server: Pick<KubeApiServer, 'failNext'>, namespace: string): string {
  server.failNext({
    method: 'POST',
    pathPattern: `/api/v1/namespaces/${namespace}/pods`,
    status: 403,
    reason: 'Forbidden',
    message: `pods "hello" is forbidden: exceeded quota: ${NO_PODS_QUOTA}, requested: pods=1, used: pods=0, limited: pods=0`,
    // Every retry of the test's time, as a quota refuses until it is lifted.
    times: 100_000,
  });
  return NO_PODS_QUOTA;
}

/** Creates every CustomResourceDefinition in crds/*.yaml (an existing one is left as it is). */
export async function installCrds(kubeConfig: KubeConfig): Promise<void> {
  const extensions = kubeConfig.makeApiClient(ApiextensionsV1Api);
  const dir = join(REPO, 'crds');
  for (const file of (await readdir(dir)).filter((name) => name.endsWith('.yaml')).sort()) {
    const crd = parseYaml(await readFile(join(dir, file), 'utf8')) as V1CustomResourceDefinition;
    try {
      await extensions.createCustomResourceDefinition({ body: crd });
    } catch (error) {
      if (!(error instanceof ApiException && error.code === 409)) throw new Error(`installing ${file} failed`, { cause: error });
    }
  }
}

export interface TestOperatorOptions {
  kubeConfig: KubeConfig;
  sidecarImage: string;
  pythonRuntimeImage: string;
  /** The operator's log goes here, not to the test's output. */
  logPath: string;
  /** Namespace of the leader-election Lease. */
  leaseNamespace: string;
  /** Its name; default runlet-operator-e2e. */
  leaseName?: string;
  /** The holder identity; default e2e-<pid>. Two operators in one process need two. */
  identity?: string;
  /** Serve health, metrics and the management API on 127.0.0.1 (an ephemeral port): `url`. Default false. */
  listen?: boolean;
  /** More settings, e.g. short RunLog upkeep intervals. */
  config?: ConfigLayer;
  /** Run the holder (scale to zero) on an ephemeral loopback port, trusting callers and replicas so; `'external'`: activators hold the calls. */
  holder?: OperatorHolderOptions | 'external';
  /** Where a pod's admin port is reached (cancels): the test kubelet's port standing for it. */
  replicaAdminAddress?: OperatorOptions['replicaAdminAddress'];
  /** Where the operator dials a holder's address to list and cancel held calls: the test kubelet's loopback port standing for it. */
  holderControlAddress?: OperatorOptions['holderControlAddress'];
  /** Where the leader scrapes a replica's load: the test kubelet's loopback port standing for the pod's admin port. */
  loadAddress?: OperatorOptions['loadAddress'];
  /**
   * A results store: the operator serves on 127.0.0.1:`port` (which must be free), where the sidecars it renders
   * send their batches to its collector.
   */
  results?: NonNullable<OperatorOptions['results']> & { port: number };
  /** Where the leader asks an activator for its waiting calls: the tests' activator's admin server. */
  activatorLoadAddress?: OperatorOptions['activatorLoadAddress'];
}

/** Where the in-memory clusters keep held async calls: the operator's default beside the holder key's `default`. */
export const HELD_CALLS_NAMESPACE = 'default-held';

/** The operator in this process, as its main() would run it, with a short leader-election retry. */
export async function startTestOperator(options: TestOperatorOptions): Promise<Operator & { url: string | undefined }> {
  const config = resolveConfig(
    {
      sidecarImage: options.sidecarImage,
      pythonRuntimeImage: options.pythonRuntimeImage,
      server: { host: '127.0.0.1', port: 0, metricsPort: 0 },
      leaderElection: { namespace: options.leaseNamespace, leaseName: options.leaseName ?? 'runlet-operator-e2e', identity: options.identity ?? `e2e-${process.pid}`, retryPeriodSeconds: 0.2 },
      logLevel: 'debug',
      holder: { host: '127.0.0.1', port: 0, heldCallsNamespace: HELD_CALLS_NAMESPACE },
      imagePullSecrets: [{ name: E2E_PULL_SECRET }],
    },
    // The collector on the port the pods were told (its own, apart from the management API's).
    options.results === undefined ? {} : { results: { collectorUrl: `http://127.0.0.1:${options.results.port}`, collectorPort: options.results.port } },
    options.config ?? {},
  );
  const logger = pino({ name: 'runlet-operator', level: 'debug' }, pino.destination({ dest: options.logPath, mkdir: true, sync: true }));
  return startOperator({
    kubeConfig: options.kubeConfig,
    config,
    logger,
    processMetrics: false,
    listen: options.listen ?? false,
    holder: options.holder,
    replicaAdminAddress: options.replicaAdminAddress,
    holderControlAddress: options.holderControlAddress,
    loadAddress: options.loadAddress,
    results: options.results === undefined ? undefined : { store: options.results.store, usage: options.results.usage },
    activatorLoadAddress: options.activatorLoadAddress,
  });
}

/**
 * The selector-less Service `service` and its Endpoints listing the holder at `ip:port` (in a cluster, the
 * operator pods' holder port): where the operator points the Endpoints of an App at zero.
 */
export async function listHolder(kubeConfig: KubeConfig, service: { namespace: string; name: string }, ip: string, port: number): Promise<void> {
  const api = new KubeApi(kubeConfigCredentials(kubeConfig), { fieldManager: 'e2e-cluster' });
  try {
    const metadata = { name: service.name, namespace: service.namespace };
    await api.apply({ apiVersion: 'v1', kind: 'Service', metadata, spec: { ports: [{ name: 'http', port: 80, protocol: 'TCP' }] } } as KubeObject);
    await api.apply({ apiVersion: 'v1', kind: 'Endpoints', metadata, subsets: [{ addresses: [{ ip }], ports: [{ name: 'http', port, protocol: 'TCP' }] }] } as KubeObject);
  } finally {
    await api.close();
  }
}
