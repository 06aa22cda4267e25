// How a container reaches the API server in a cluster: the kubelet sets KUBERNETES_SERVICE_HOST and
// KUBERNETES_SERVICE_PORT, and the service account's token and CA are mounted at a fixed path. A local
// process cannot see that fixed path (only the strings it is configured with are redirected, rewrite.ts), so
// a container that mounts a volume there also gets KUBECONFIG: a kubeconfig naming the same server, the
// mounted CA and the mounted token file, which is what its in-cluster configuration resolves to.
import { writeFile } from 'node:fs/promises';
import { rewritePathValue, type Rewrites } from './rewrite.ts';

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/** Where pods reach the API server of a real control plane (on this machine: loopback). */
export interface InClusterApi {
  host: string;
  port: number;
}

/** The variables the container gets; writes `kubeconfigPath` when it mounts the service-account directory. */
export async function inClusterEnv(api: InClusterApi, rewrites: Rewrites, kubeconfigPath: string): Promise<Record<string, string>> {
  const env: Record<string, string> = { KUBERNETES_SERVICE_HOST: api.host, KUBERNETES_SERVICE_PORT: String(api.port) };
  const serviceAccountDir = rewritePathValue(SERVICE_ACCOUNT_DIR, rewrites);
  if (serviceAccountDir === SERVICE_ACCOUNT_DIR) return env;
  const kubeconfig = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'in-cluster', cluster: { server: `https://${api.host}:${api.port}`, 'certificate-authority': `${serviceAccountDir}/ca.crt` } }],
    users: [{ name: 'service-account', user: { tokenFile: `${serviceAccountDir}/token` } }],
    contexts: [{ name: 'in-cluster', context: { cluster: 'in-cluster', user: 'service-account' } }],
    'current-context': 'in-cluster',
  };
  await writeFile(kubeconfigPath, JSON.stringify(kubeconfig));
  env.KUBECONFIG = kubeconfigPath;
  return env;
}
