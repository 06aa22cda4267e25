// How a container reaches the API server in a cluster: the kubelet sets KUBERNETES_SERVICE_HOST and
// KUBERNETES_SERVICE_PORT, and the service account's token and CA are mounted at a fixed path. A local
// process cannot see that fixed path (only the strings it is configured with are redirected, rewrite.ts), so
// a container that mounts a volume there is also told where it really is: RUNLET_SERVICE_ACCOUNT_DIR, which
// the sidecar reads its in-cluster credentials from (kube/in-cluster.ts), exactly as in a pod.
import { rewritePathValue, type Rewrites } from './rewrite.ts';

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/** Where pods reach the API server of a real control plane (on this machine: loopback). */
export interface InClusterApi {
  host: string;
  port: number;
}

/** The variables the container gets. */
export function inClusterEnv(api: InClusterApi, rewrites: Rewrites): Record<string, string> {
  const env: Record<string, string> = { KUBERNETES_SERVICE_HOST: api.host, KUBERNETES_SERVICE_PORT: String(api.port) };
  const serviceAccountDir = rewritePathValue(SERVICE_ACCOUNT_DIR, rewrites);
  if (serviceAccountDir === SERVICE_ACCOUNT_DIR) return env;
  env.RUNLET_SERVICE_ACCOUNT_DIR = serviceAccountDir;
  return env;
}
