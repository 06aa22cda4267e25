// What kube/'s client needs to reach an API server: where it is, how to trust it, how to authenticate.
// Implemented for a pod's service account (in-cluster.ts) and for a client-node KubeConfig (kubeconfig.ts);
// load-credentials.ts picks one as client-node's loadFromDefault would.
import type { ConnectionOptions } from 'node:tls';
import type { KubeConfig } from '@kubernetes/client-node';

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
  /** The same cluster and user as a client-node KubeConfig, for client-node's Watch: loads client-node. */
  kubeConfig(): Promise<KubeConfig>;
}
