// A client-node KubeConfig as KubeCredentials: client-node reads the kubeconfig files and implements their
// credentials (token files, client certificates, exec and auth-provider plugins, refreshed per request). The
// static import is of the type only, so this module does not load client-node; loadKubeconfig imports it
// when called, which only a process outside a pod does (it adds ~46 MB of RSS).
import { existsSync } from 'node:fs';
import type { RequestOptions } from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';
import type { KubeCredentials } from './credentials.ts';

/**
 * The current context of the kubeconfig files at `paths`, merged as kubectl merges them: files that do not
 * exist are skipped, and the first file to set current-context wins.
 */
export async function loadKubeconfig(paths: readonly string[]): Promise<KubeCredentials> {
  const { KubeConfig } = await import('@kubernetes/client-node');
  const present = paths.filter((path) => existsSync(path));
  if (present.length === 0) throw new Error(`no kubeconfig file exists of ${paths.join(', ')}`);
  const merged = new KubeConfig();
  for (const [index, path] of present.entries()) {
    const kubeConfig = index === 0 ? merged : new KubeConfig();
    try {
      kubeConfig.loadFromFile(path);
    } catch (error) {
      throw new Error(`cannot load the kubeconfig ${path}: ${(error as Error).message}`, { cause: error });
    }
    if (index > 0) merged.mergeConfig(kubeConfig, Boolean(merged.currentContext));
  }
  return kubeConfigCredentials(merged);
}

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
    kubeConfig: async () => kubeConfig,
  };
}
