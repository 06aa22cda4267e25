// Where kube/'s client connects and how it authenticates, found as client-node's KubeConfig.loadFromDefault
// finds it (KUBECONFIG, else ~/.kube/config, else the pod's service account). In a pod this loads no
// kubeconfig machinery: @kubernetes/client-node adds ~46 MB to the RSS of a sidecar whose target is 80 MB,
// so it is imported only to read a kubeconfig (kubeconfig.ts).
import { access } from 'node:fs/promises';
import { delimiter, join } from 'node:path';
import type { KubeCredentials } from './credentials.ts';
import { inClusterCredentials, SERVICE_ACCOUNT_DIR } from './in-cluster.ts';
import { loadKubeconfig } from './kubeconfig.ts';

export interface CredentialSources {
  /** KUBECONFIG, HOME, KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are read from it. */
  env?: NodeJS.ProcessEnv;
  /** Where the pod's service-account token and CA are mounted. Default SERVICE_ACCOUNT_DIR. */
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
  if (listed.length > 0) return loadKubeconfig(listed);
  const home = env.HOME ? join(env.HOME, '.kube', 'config') : undefined;
  if (home !== undefined && (await exists(home))) return loadKubeconfig([home]);
  if (await exists(join(serviceAccountDir, 'token'))) return inClusterCredentials({ env, serviceAccountDir });
  throw new Error(
    `no Kubernetes API credentials: KUBECONFIG is not set, ${home === undefined ? 'HOME is not set' : `${home} does not exist`}, ` +
      `and there is no service-account token at ${join(serviceAccountDir, 'token')}`,
  );
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}
