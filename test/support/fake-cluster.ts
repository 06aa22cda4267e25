// The fake cluster of the tests and the bench: the in-memory API server of test/kube (started by the caller)
// with the App and RunLog CRDs installed, a kube/ client that reaches it as a pod does (service-account CA and
// token), the operator on it, and bounded waits on API state.
import type { KubeConfig } from '@kubernetes/client-node';
import type { KubeCredentials } from '../../kube/credentials.ts';
import { appCrd, runLogCrd } from '../../crds/crd.ts';
import type { App } from '../../crds/app-schema.ts';
import { resolveConfig, type ConfigLayer, type OperatorConfig } from '../../operator/config.ts';
import { KubeApi } from '../../kube/client.ts';
import { resourcePath, type KubeObject } from '../../kube/objects.ts';
import { createOperator, type Operator } from '../../operator/main.ts';
import { PYTHON_IMAGE, SIDECAR_IMAGE } from './operator-apps.ts';
import { testLogger } from './logger.ts';
import { waitFor } from './wait.ts';
import { kubePathOf } from './kube-path.ts';
import type { KubePath } from '../../kube/paths.ts';

/** Generous for a loaded 2-core machine: only a failing test waits this long. */
export const STATE_TIMEOUT_MS = 20_000;

/** What the helpers need of an API server; test/kube's KubeApiServer is one. */
export interface ApiServer {
  credentials(): Promise<KubeCredentials>;
  kubeConfig(): KubeConfig;
  close(): Promise<void>;
}

export interface TestCluster<Server extends ApiServer = ApiServer> {
  server: Server;
  api: KubeApi;
  close(): Promise<void>;
}

/** Installs the CRDs on a freshly started server; close() closes the client and the server. */
export async function prepareCluster<Server extends ApiServer>(server: Server): Promise<TestCluster<Server>> {
  const api = new KubeApi(await server.credentials());
  for (const crd of [appCrd(), runLogCrd()]) await api.create(kubePathOf('/apis/apiextensions.k8s.io/v1/customresourcedefinitions'), crd as unknown as KubeObject);
  return {
    server,
    api,
    async close() {
      await api.close();
      await server.close();
    },
  };
}

/** Leader-election and watch timings short enough for tests; images fixed; the server on an ephemeral port. */
export function testConfig(...layers: ConfigLayer[]): OperatorConfig {
  return resolveConfig(
    {
      sidecarImage: SIDECAR_IMAGE,
      pythonRuntimeImage: PYTHON_IMAGE,
      server: { host: '127.0.0.1', port: 0, metricsPort: 0 },
      // The collector's port too: several operators share this machine's loopback.
      results: { collectorPort: 0 },
      leaderElection: { namespace: 'default', leaseName: 'runlet-operator', identity: 'operator-a', leaseDurationSeconds: 4, renewDeadlineSeconds: 3, retryPeriodSeconds: 0.2 },
      logLevel: 'silent',
    },
    ...layers,
  );
}

export function testOperator(cluster: TestCluster, ...layers: ConfigLayer[]): Operator {
  return createOperator({ kubeConfig: cluster.server.kubeConfig(), config: testConfig(...layers), logger: testLogger(), processMetrics: false });
}

export const paths = {
  app: (namespace: string, name?: string) => resourcePath({ apiVersion: 'runlet.dev/v1alpha1', kind: 'App', namespace, name }),
  deployment: (namespace: string, name?: string) => resourcePath({ apiVersion: 'apps/v1', kind: 'Deployment', namespace, name }),
  service: (namespace: string, name: string) => resourcePath({ apiVersion: 'v1', kind: 'Service', namespace, name }),
  ingress: (namespace: string, name: string) => resourcePath({ apiVersion: 'networking.k8s.io/v1', kind: 'Ingress', namespace, name }),
  configMap: (namespace: string, name?: string) => resourcePath({ apiVersion: 'v1', kind: 'ConfigMap', namespace, name }),
  serviceAccount: (namespace: string, name: string) => resourcePath({ apiVersion: 'v1', kind: 'ServiceAccount', namespace, name }),
  role: (namespace: string, name: string) => resourcePath({ apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', namespace, name }),
  roleBinding: (namespace: string, name: string) => resourcePath({ apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'RoleBinding', namespace, name }),
  lease: (namespace: string, name: string) => resourcePath({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', namespace, name }),
};

export async function createNamespace(api: KubeApi, name: string): Promise<void> {
  await api.create(kubePathOf('/api/v1/namespaces'), { apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
}

export async function createApp(api: KubeApi, namespace: string, name: string, spec: Record<string, unknown>): Promise<App> {
  return api.create(paths.app(namespace), { apiVersion: 'runlet.dev/v1alpha1', kind: 'App', metadata: { name }, spec } as KubeObject) as Promise<App>;
}

export async function createCodeConfigMap(api: KubeApi, namespace: string, name: string, app: string, data: Record<string, string>): Promise<void> {
  await api.create(paths.configMap(namespace), { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, labels: { 'runlet.dev/app': app } }, data } as KubeObject);
}

/** The App once `predicate` holds for it (polled from the API server, bounded). */
export function waitForApp(api: KubeApi, namespace: string, name: string, predicate: (app: App) => boolean, what: string): Promise<App> {
  return waitFor(
    async () => {
      const app = await api.find<App & KubeObject>(paths.app(namespace, name));
      return app !== undefined && predicate(app) ? app : undefined;
    },
    { timeoutMs: STATE_TIMEOUT_MS, what: `App ${namespace}/${name}: ${what}` },
  );
}

export function condition(app: App, type: string): { status: string; reason: string; message: string } | undefined {
  return app.status?.conditions?.find((c) => c.type === type);
}

/**
 * ChildrenApplied=True for the App's current generation: reconciled. (Ready needs pods, which only a cluster
 * with a kubelet runs.)
 */
export function isAppliedAtGeneration(app: App): boolean {
  return app.status?.observedGeneration === app.metadata.generation && condition(app, 'ChildrenApplied')?.status === 'True';
}

export async function gone(api: KubeApi, path: KubePath): Promise<boolean> {
  return (await api.find(path)) === undefined;
}
