// A client-node KubeConfig as KubeCredentials: for kubeconfig users whose credentials come from a plugin that
// client-node implements (exec, auth-provider), and for tests that hold a KubeConfig. The import is of the
// type only, so this module does not load client-node; its callers have.
import type { RequestOptions } from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';
import type { KubeCredentials } from './kube-credentials.ts';

export function kubeConfigCredentials(kubeConfig: KubeConfig): KubeCredentials {
  const cluster = kubeConfig.getCurrentCluster();
  if (cluster === null) throw new Error('the kubeconfig has no current cluster');
  // Runs the user's plugin when its credential has expired: per request, as tokens rotate.
  const httpsOptions = async (): Promise<RequestOptions> => {
    const options: RequestOptions = {};
    await kubeConfig.applyToHTTPSOptions(options);
    return options;
  };
  return {
    server: cluster.server.replace(/\/+$/, ''),
    proxyUrl: cluster.proxyUrl,
    async tls() {
      const { ca, cert, key, servername, rejectUnauthorized } = await httpsOptions();
      return { ca, cert, key, servername, rejectUnauthorized: rejectUnauthorized ?? true };
    },
    async authHeaders() {
      const options = await httpsOptions();
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(options.headers ?? {})) {
        if (value !== undefined) headers[name.toLowerCase()] = String(value);
      }
      if (typeof options.auth === 'string') headers.authorization = `Basic ${Buffer.from(options.auth).toString('base64')}`;
      return headers;
    },
  };
}
