// The cluster of this machine: the in-memory API server (test/kube) with the test kubelet (test/kubelet)
// running each pod as local processes — `runlet sidecar` from cli/runlet.ts and the Python runtime from
// runtime/python — and the operator in-process. Sidecars verify tokens with their project's HS256 key and
// against a stand-in for the cluster's service-account issuer, and record runs in their pod's RunLog through
// the fake API server, as in a cluster.
import { randomBytes } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import type { ConfigLayer } from '../../operator/config.ts';
import { signLocalToken } from '../../sidecar/auth/local-key.ts';
import { startKubeApiServer, type KubeApiServer } from '../kube/index.ts';
import { sidecarUrls, startKubelet, type ImageTable, type Kubelet } from '../kubelet/index.ts';
import { waitFor } from '../support/wait.ts';
import { REPO, installCrds, refusePodsLikeQuota, startTestOperator, type E2eCluster } from './e2e-cluster.ts';
import { startServiceAccountIssuer, type ServiceAccountIssuer } from './service-account-issuer.ts';
import { isAlive, readOrEmpty } from '../support/process-checks.ts';
import type { Operator, OperatorHolderOptions } from '../../operator/main.ts';
import { SIDECAR_RUN_PORT } from '../../operator/render/names.ts';
import { RunAuthenticator } from '../../sidecar/auth/authenticator.ts';
import { loadIssuerAuthConfig } from '../../sidecar/auth/config.ts';
import { KubeApi } from '../../kube/client.ts';
import { kubeConfigCredentials } from '../../kube/kubeconfig.ts';
import type { KubeConfig } from '@kubernetes/client-node';
import type { KubeObject } from '../../kube/objects.ts';

const SIDECAR_IMAGE = 'registry.test/runlet:e2e';
const PYTHON_IMAGE = 'registry.test/runlet-python:e2e';

/** What a test can do to this cluster beyond the shared suite: the API server's and kubelet's controls. */
export interface LocalCluster extends E2eCluster {
  readonly server: KubeApiServer;
  readonly kubelet: Kubelet;
  /** The operator's HTTP server: health, metrics and the management API (/v2). */
  readonly operatorUrl: string;
  /** The HS256 key every sidecar verifies run-interface tokens with (`signLocalToken`). */
  readonly authKey: string;
  /** The service-account token issuer every sidecar trusts, whatever the project. */
  readonly issuer: ServiceAccountIssuer;
  /** The operator in this process (its holder, with `holder: true`). */
  readonly operator: Operator;
  /** With `holder: true`: what the operator's holder was started with, to start another like it. */
  readonly holderOptions: OperatorHolderOptions | undefined;
}

/**
 * `holder`: the operator runs the holder (scale to zero) trusting the issuer's tokens, as the chart configures it:
 * it makes its key's Secret `default/runlet-holder-key` and copies it into the app namespaces, where the sidecars
 * read it from their environment (a secretKeyRef); and the Endpoints `default/runlet-holder` list it, as the
 * endpoints controller lists the operator pods' holder port for the chart's Service.
 */
export async function startLocalCluster(
  options: { operatorConfig?: ConfigLayer; holder?: boolean; coldStartTimeoutMs?: OperatorHolderOptions['coldStartTimeoutMs'] } = {},
): Promise<LocalCluster> {
  const workDir = await mkdtemp(join(tmpdir(), 'runlet-operator-e2e-'));
  const server = await startKubeApiServer();
  const kubeConfig = server.kubeConfig();
  const serviceAccountDir = join(workDir, 'serviceaccount');
  await server.writeServiceAccount(serviceAccountDir);
  await installCrds(kubeConfig);

  const authKey = randomBytes(32).toString('hex');
  const issuer = await startServiceAccountIssuer();
  const images: ImageTable = {
    [SIDECAR_IMAGE]: {
      commands: { runlet: [process.execPath, join(REPO, 'cli/runlet.ts')] },
      // What the sidecar would find in a cluster: API access (the service account, here mounted in the work dir;
      // no kubeconfig, not even one in the user's home) and a token verifier.
      env: { ...server.inClusterEnv, RUNLET_SERVICE_ACCOUNT_DIR: serviceAccountDir, KUBECONFIG: '', HOME: workDir, RUNLET_RUN_STORE: 'runlog', RUNLET_AUTH_KEY: authKey, RUNLET_AUTH_JWKS_URL: issuer.jwksUrl },
    },
    [PYTHON_IMAGE]: {
      commands: { python: ['python3'], python3: ['python3'] },
      env: { PYTHONPATH: join(REPO, 'runtime/python'), PYTHONUNBUFFERED: '1' },
    },
  };
  const kubelet = await startKubelet({ kubeConfig, images, workDir: join(workDir, 'kubelet') });
  const holderOptions: OperatorHolderOptions | undefined = options.holder
    ? {
        // What `runlet operator` builds from the sidecars' own RUNLET_AUTH_JWKS_URL (the issuer; no project key).
        auth: new RunAuthenticator(loadIssuerAuthConfig((name) => (name === 'auth-jwks-url' ? issuer.jwksUrl : undefined), {})),
        // Pods share 127.0.0.1 here: a pod's sidecar run port is the local port standing for it.
        replicaAddress: (pod) => ({ host: '127.0.0.1', port: kubelet.pod(pod.metadata!.name!, pod.metadata!.namespace)!.localPort(SIDECAR_RUN_PORT) }),
        retryDelayMs: 200,
        coldStartTimeoutMs: options.coldStartTimeoutMs,
      }
    : undefined;
  const operatorLog = join(workDir, 'operator.log');
  const operator = await startTestOperator({
    kubeConfig,
    sidecarImage: SIDECAR_IMAGE,
    pythonRuntimeImage: PYTHON_IMAGE,
    logPath: operatorLog,
    leaseNamespace: 'default',
    listen: true,
    config: options.operatorConfig,
    holder: holderOptions,
  });
  if (operator.holder !== undefined) await listHolder(kubeConfig, Number(new URL(operator.holder.url).port));

  const localPod = (pod: V1Pod) =>
    waitFor(() => kubelet.pod(pod.metadata!.name!, pod.metadata!.namespace), { what: `pod ${pod.metadata!.name} running in the test kubelet` });

  return {
    description: 'the in-memory API server with the test kubelet',
    kubeConfig,
    server,
    kubelet,
    operatorUrl: operator.url!,
    authKey,
    issuer,
    operator,
    holderOptions,
    async sidecar(pod) {
      return sidecarUrls(await localPod(pod));
    },
    token: (namespace) => signLocalToken({ projectId: namespace, key: authKey }),
    refusePods: async (namespace) => refusePodsLikeQuota(server, namespace),
    stopCheck(pod) {
      const local = kubelet.pod(pod.metadata!.name!, pod.metadata!.namespace);
      if (local === undefined) throw new Error(`pod ${pod.metadata!.name} does not run in the test kubelet`);
      const pids = local.processes().map((p) => p.pid);
      return async () => pids.every((pid) => !isAlive(pid));
    },
    diagnostics: () => `== ${operatorLog}\n${readOrEmpty(operatorLog)}\n${kubelet.diagnostics()}`,
    async close() {
      await operator.stop();
      await kubelet.stop();
      await server.close();
      await issuer.close();
    },
  };
}

/** The Service and Endpoints `default/runlet-holder` listing the holder (in a cluster, the operator pods' holder port). */
async function listHolder(kubeConfig: KubeConfig, port: number): Promise<void> {
  const api = new KubeApi(kubeConfigCredentials(kubeConfig), { fieldManager: 'local-cluster' });
  try {
    const metadata = { name: 'runlet-holder', namespace: 'default' };
    await api.apply({ apiVersion: 'v1', kind: 'Service', metadata, spec: { ports: [{ name: 'http', port: 80 }] } } as KubeObject);
    await api.apply({ apiVersion: 'v1', kind: 'Endpoints', metadata, subsets: [{ addresses: [{ ip: '127.0.0.1' }], ports: [{ name: 'http', port }] }] } as KubeObject);
  } finally {
    await api.close();
  }
}
