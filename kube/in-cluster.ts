// In a pod: the API server of KUBERNETES_SERVICE_HOST and _PORT, trusted with the service account's CA and
// called with its token, which kubelet rotates on disk. Reads two files and loads nothing else.
import { readFile } from 'node:fs/promises';
import { isIPv6 } from 'node:net';
import { join } from 'node:path';
import type { KubeCredentials } from './credentials.ts';
import { TokenFile } from './token-file.ts';

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export interface InClusterOptions {
  env: NodeJS.ProcessEnv;
  serviceAccountDir: string;
  /** The token file's clock (tests move it by hand). */
  now?: () => number;
}

export async function inClusterCredentials(options: InClusterOptions): Promise<KubeCredentials> {
  const host = options.env.KUBERNETES_SERVICE_HOST;
  const port = options.env.KUBERNETES_SERVICE_PORT;
  if (!host || !port) {
    throw new Error(
      `a service-account token is mounted at ${options.serviceAccountDir}, but KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT ` +
        'are not both set: not in a pod? Set KUBECONFIG instead',
    );
  }
  const caFile = join(options.serviceAccountDir, 'ca.crt');
  let ca: Buffer;
  try {
    ca = await readFile(caFile);
  } catch (error) {
    throw new Error(`cannot read the service account's CA certificate ${caFile}: ${(error as Error).message}`, { cause: error });
  }
  const tokenPath = join(options.serviceAccountDir, 'token');
  const token = new TokenFile(tokenPath, { now: options.now });
  // Fail at startup, not at the first request, when the token cannot be read.
  await token.read();
  // Always https, as client-go: client-node picks http for ports 80, 8080 and 8001, then refuses plain HTTP.
  const server = `https://${isIPv6(host) ? `[${host}]` : host}:${port}`;
  return {
    server,
    tls: async () => ({ ca, rejectUnauthorized: true }),
    authHeaders: async () => ({ authorization: `Bearer ${await token.read()}` }),
    async kubeConfig() {
      const { KubeConfig } = await import('@kubernetes/client-node');
      const kubeConfig = new KubeConfig();
      // What client-node's loadFromCluster builds, from these options rather than process.env and fixed paths.
      kubeConfig.loadFromClusterAndUser(
        { name: 'inCluster', server, caFile, skipTLSVerify: false },
        { name: 'inClusterUser', authProvider: { name: 'tokenFile', config: { tokenFile: tokenPath } } },
      );
      return kubeConfig;
    },
  };
}
