// The cluster KUBECONFIG points at, for running the same end-to-end suite where pods are real: the operator
// still runs in this process; pods run the images named by RUNLET_E2E_SIDECAR_IMAGE and
// RUNLET_E2E_PYTHON_IMAGE (built by `make images`); sidecars are reached through port-forwards; tokens are
// service-account tokens (TokenRequest, audience "runlet"), which sidecars verify against the API server.
import { readFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiException, CoreV1Api, KubeConfig, PortForward, type V1Pod } from '@kubernetes/client-node';
import type { SidecarUrls } from '../kubelet/index.ts';
import { sidecarPorts } from '../kubelet/index.ts';
import { waitFor } from '../support/wait.ts';
import { createNoPodsQuota, installCrds, startTestOperator, type E2eCluster } from './e2e-cluster.ts';

const TOKEN_AUDIENCE = 'runlet';

/** Why the suite cannot run against a real cluster here, or undefined when it can. */
export function realClusterSkipReason(env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (!env.KUBECONFIG) return 'KUBECONFIG is not set (this machine has no cluster; the in-memory API server and test kubelet stand in)';
  if (!env.RUNLET_E2E_SIDECAR_IMAGE || !env.RUNLET_E2E_PYTHON_IMAGE) {
    return `KUBECONFIG is set, but RUNLET_E2E_SIDECAR_IMAGE and RUNLET_E2E_PYTHON_IMAGE must name images the cluster can pull`;
  }
  return undefined;
}

/** A local listener forwarding every connection to a pod port. */
async function forwardPort(kubeConfig: KubeConfig, namespace: string, pod: string, port: number): Promise<Server> {
  const forward = new PortForward(kubeConfig);
  const server = createServer((socket) => {
    forward.portForward(namespace, pod, [port], socket, null, socket).catch(() => socket.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}

function urlOf(server: Server): string {
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('a port-forward listener has no TCP address');
  return `http://127.0.0.1:${address.port}`;
}

export async function startRealCluster(): Promise<E2eCluster> {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromDefault();
  const core = kubeConfig.makeApiClient(CoreV1Api);
  await installCrds(kubeConfig);
  const operatorLog = join(await mkdtemp(join(tmpdir(), 'runlet-operator-e2e-')), 'operator.log');
  const operator = await startTestOperator({
    kubeConfig,
    sidecarImage: process.env.RUNLET_E2E_SIDECAR_IMAGE!,
    pythonRuntimeImage: process.env.RUNLET_E2E_PYTHON_IMAGE!,
    logPath: operatorLog,
    leaseNamespace: 'default',
  });
  const forwards: Server[] = [];
  /** Port-forwards by pod uid: one pair per pod. */
  const sidecars = new Map<string, SidecarUrls>();

  return {
    description: `the cluster of ${process.env.KUBECONFIG}`,
    kubeConfig,
    async sidecar(pod) {
      const known = sidecars.get(pod.metadata!.uid!);
      if (known !== undefined) return known;
      const { runPort, adminPort } = sidecarPorts(pod.spec, pod.metadata!.name!);
      const [run, admin] = await Promise.all(
        [runPort, adminPort].map((port) => forwardPort(kubeConfig, pod.metadata!.namespace!, pod.metadata!.name!, port)),
      );
      forwards.push(run!, admin!);
      const urls = { runUrl: urlOf(run!), adminUrl: urlOf(admin!) };
      sidecars.set(pod.metadata!.uid!, urls);
      return urls;
    },
    async token(namespace) {
      // The namespace's default service account appears shortly after the namespace.
      return waitFor(
        () =>
          core
            .createNamespacedServiceAccountToken({ namespace, name: 'default', body: { spec: { audiences: [TOKEN_AUDIENCE], expirationSeconds: 3600 } } })
            .then((request) => request.status?.token)
            .catch((error: unknown) => {
              if (error instanceof ApiException && error.code === 404) return undefined;
              throw error;
            }),
        { what: `a token of ${namespace}/default`, timeoutMs: 30_000, intervalMs: 250 },
      );
    },
    refusePods: (namespace) => createNoPodsQuota(kubeConfig, namespace),
    stopCheck(pod: V1Pod) {
      // A real kubelet removes the pod only once its containers have stopped.
      return async () => {
        try {
          const current = await core.readNamespacedPod({ namespace: pod.metadata!.namespace!, name: pod.metadata!.name! });
          return current.metadata?.uid !== pod.metadata?.uid;
        } catch (error) {
          if (error instanceof ApiException && error.code === 404) return true;
          throw error;
        }
      };
    },
    diagnostics() {
      try {
        return `== ${operatorLog}\n${readFileSync(operatorLog, 'utf8')}`;
      } catch {
        return `(no operator log at ${operatorLog})`;
      }
    },
    async close() {
      for (const server of forwards) server.close();
      await operator.stop();
    },
  };
}
