// Where the sidecar's Kubernetes API client connects and how it authenticates, found as client-node's
// KubeConfig.loadFromDefault finds it (KUBECONFIG, else ~/.kube/config, else the pod's service account), without
// loading @kubernetes/client-node: it adds ~46 MB to the RSS of a sidecar whose target is 80 MB. Only a
// kubeconfig user with an `exec` or `auth-provider` plugin still loads it (kube-credentials-kubeconfig.ts).
import { access } from 'node:fs/promises';
import { delimiter, join } from 'node:path';
import type { ConnectionOptions } from 'node:tls';
import { inClusterCredentials, SERVICE_ACCOUNT_DIR } from './kube-credentials-in-cluster.ts';

/** TLS options of the connections to the API server. */
export type KubeTls = Pick<ConnectionOptions, 'ca' | 'cert' | 'key' | 'servername'> & { rejectUnauthorized: boolean };

export interface KubeCredentials {
  /** The API server's URL without a trailing slash: `https://10.0.0.1:443`. */
  readonly server: string;
  /** An HTTP(S) proxy to reach the API server through (a kubeconfig cluster's `proxy-url`). */
  readonly proxyUrl?: string;
  /** Read once per connection pool. */
  tls(): Promise<KubeTls>;
  /** Read before every request, since tokens rotate. Header names are lower case. */
  authHeaders(): Promise<Record<string, string>>;
}

export interface CredentialSources {
  /** KUBECONFIG, HOME, KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are read from it. */
  env?: NodeJS.ProcessEnv;
  /** Where the pod's service-account token and CA are mounted. */
  serviceAccountDir?: string;
}

/**
 * The API server and credentials, in client-node's order: the files of KUBECONFIG when it is set (merged as
 * kubectl merges them), else ~/.kube/config when it exists, else the pod's service account when its token is
 * mounted. Throws when none applies (client-node would fall back to http://localhost:8080 and fail later).
 */
export async function loadKubeCredentials(sources: CredentialSources = {}): Promise<KubeCredentials> {
  const env = sources.env ?? process.env;
  const serviceAccountDir = sources.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
  const listed = (env.KUBECONFIG ?? '').split(delimiter).filter(Boolean);
  if (listed.length > 0) return kubeconfigCredentials(listed);
  const home = env.HOME ? join(env.HOME, '.kube', 'config') : undefined;
  if (home !== undefined && (await exists(home))) return kubeconfigCredentials([home]);
  if (await exists(join(serviceAccountDir, 'token'))) return inClusterCredentials({ env, serviceAccountDir });
  throw new Error(
    `no Kubernetes API credentials: KUBECONFIG is not set, ${home === undefined ? 'HOME is not set' : `${home} does not exist`}, ` +
      `and there is no service-account token at ${join(serviceAccountDir, 'token')}`,
  );
}

/** Loaded only for a kubeconfig: its YAML parser is ~8 MB of RSS that a pod (service account) never needs. */
async function kubeconfigCredentials(paths: string[]): Promise<KubeCredentials> {
  const { kubeconfigCredentials: fromFiles } = await import('./kube-credentials-kubeconfig.ts');
  return fromFiles(paths);
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}
