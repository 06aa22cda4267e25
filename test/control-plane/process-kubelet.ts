// The test kubelet (test/kubelet) as the Node of a control-plane.sh cluster: it registers itself, runs the pods
// the scheduler binds to it as local processes, and gives them service-account tokens from the TokenRequest
// API. Shared by the test fixture (test/operator/control-plane-cluster.ts) and `npm run kubelet`, with which a
// person follows README's "On Kubernetes" by hand.
import { join } from 'node:path';
import { ApiException, CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { startKubelet, type ImageTable, type Kubelet } from '../kubelet/index.ts';
import { IMAGE_JEMALLOC_PATH } from '../../operator/render/sidecar-container.ts';
import { SERVICE_ACCOUNT_DIR } from '../kubelet/in-cluster.ts';
import { POD_NETWORK_ENV, POD_NETWORK_PRELOAD } from '../kubelet/pod-network-dials.ts';
import { waitFor } from '../support/wait.ts';

const REPO = join(import.meta.dirname, '../..');

/** The image names `make images` builds and install.yaml runs (any tag). */
export const RELEASE_IMAGES = { runlet: 'runlet/runlet', pythonRuntime: 'runlet/python-runtime' } as const;

/**
 * The runlet image (operator and sidecar: `runlet …`, its entrypoint) and the Python runtime image as this
 * checkout's programs. `server` is the API server's URL on loopback. `runlet.node`: the argv of the Node that
 * runs `runlet` (default this process's binary), `runlet.env`: more variables of its image.
 */
export function localImages(
  server: string,
  names: { runlet: string; pythonRuntime: string } = RELEASE_IMAGES,
  runlet: { node?: readonly string[]; env?: Record<string, string> } = {},
  podNetworkFile?: string,
): ImageTable {
  // The operator dials pods at their IPs (its load scrapes): through the kubelet's map to their local ports.
  const podNetwork = podNetworkFile === undefined ? [] : ['--import', POD_NETWORK_PRELOAD];
  return {
    [names.runlet]: {
      commands: { runlet: [...(runlet.node ?? [process.execPath]), ...podNetwork, join(REPO, 'cli/runlet.ts')] },
      entrypoint: ['runlet'],
      // The sidecar runs on this machine's malloc: the image's jemalloc is not here.
      files: { [IMAGE_JEMALLOC_PATH]: '' },
      env: {
        ...runlet.env,
        ...(podNetworkFile === undefined ? {} : { [POD_NETWORK_ENV]: podNetworkFile }),
        // In a pod the sidecar fetches the issuer's key set from https://kubernetes.default.svc, which does
        // not resolve here: the same endpoint at the API server's loopback address, with the pod's own token.
        RUNLET_AUTH_JWKS_URL: `${server}/openid/v1/jwks`,
        RUNLET_AUTH_JWKS_CA_FILE: `${SERVICE_ACCOUNT_DIR}/ca.crt`,
        RUNLET_AUTH_JWKS_TOKEN_FILE: `${SERVICE_ACCOUNT_DIR}/token`,
        // The operator's port is set in its configuration file, which the kubelet does not rewrite: the
        // variable (which overrides the file) is, to the local port standing for the container's 8080.
        RUNLET_OPERATOR_HOST: '127.0.0.1',
        RUNLET_METRICS_PORT: '8080',
        // And the results collector's (8082 in the file).
        RUNLET_RESULTS_COLLECTOR_PORT: '8082',
        // The same for the holder's port (8090 in the file): two operator pods share this machine's loopback.
        RUNLET_HOLDER_HOST: '127.0.0.1',
        RUNLET_HOLDER_PORT: '8090',
      },
    },
    [names.pythonRuntime]: {
      commands: { python: ['python3'], python3: ['python3'] },
      env: { PYTHONPATH: join(REPO, 'runtime/python'), PYTHONUNBUFFERED: '1' },
    },
  };
}

/** A token of a service account from the TokenRequest API, once the account exists (it follows its namespace). */
export function requestToken(
  core: CoreV1Api,
  namespace: string,
  name: string,
  spec: { audiences?: string[]; expirationSeconds?: number; boundPod?: V1Pod } = {},
): Promise<string> {
  const { boundPod } = spec;
  const body = {
    spec: {
      audiences: spec.audiences ?? [],
      expirationSeconds: spec.expirationSeconds ?? 3600,
      ...(boundPod === undefined ? {} : { boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: boundPod.metadata!.name!, uid: boundPod.metadata!.uid! } }),
    },
  };
  return waitFor(
    () =>
      core
        .createNamespacedServiceAccountToken({ namespace, name, body })
        .then((request) => request.status?.token)
        .catch((error: unknown) => {
          if (error instanceof ApiException && error.code === 404) return undefined;
          throw error;
        }),
    { what: `a token of ${namespace}/${name}`, timeoutMs: 30_000, intervalMs: 250 },
  );
}

export interface ControlPlaneKubeletOptions {
  /** An admin of the cluster (the kubelet writes Nodes, Leases, pod status). */
  kubeConfig: KubeConfig;
  /** The API server's URL on loopback, `https://127.0.0.1:<port>`. */
  server: string;
  workDir: string;
  images: ImageTable;
  /** Where the kubelet publishes the pods' addresses for their processes (localImages' `podNetworkFile`). */
  podNetworkFile?: string;
}

export function startControlPlaneKubelet(options: ControlPlaneKubeletOptions): Promise<Kubelet> {
  const core = options.kubeConfig.makeApiClient(CoreV1Api);
  const { hostname, port } = new URL(options.server);
  return startKubelet({
    kubeConfig: options.kubeConfig,
    images: options.images,
    workDir: options.workDir,
    podNetworkFile: options.podNetworkFile,
    realControlPlane: { host: hostname, port: Number(port) },
    // The tier's API server is 1.20: its kubelet would ask hooks the old way.
    hookRequests: 'before-1.26',
    serviceAccountToken: (pod, audience, expirationSeconds) =>
      requestToken(core, pod.metadata!.namespace!, pod.spec?.serviceAccountName ?? 'default', {
        audiences: audience === undefined ? undefined : [audience],
        expirationSeconds,
        boundPod: pod,
      }),
  });
}
