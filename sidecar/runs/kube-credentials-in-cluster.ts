// In a pod: the API server of KUBERNETES_SERVICE_HOST and _PORT, trusted with the service account's CA and
// called with its token, which kubelet rotates on disk.
import { readFile } from 'node:fs/promises';
import { isIPv6 } from 'node:net';
import { join } from 'node:path';
import type { KubeCredentials } from './kube-credentials.ts';
import { TokenFile } from './kube-token-file.ts';

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
  const token = new TokenFile(join(options.serviceAccountDir, 'token'), { now: options.now });
  // Fail at startup, not at the first request, when the token cannot be read.
  await token.read();
  return {
    // Always https, as client-go: client-node picks http for ports 80, 8080 and 8001, then refuses plain HTTP.
    server: `https://${isIPv6(host) ? `[${host}]` : host}:${port}`,
    tls: async () => ({ ca, rejectUnauthorized: true }),
    authHeaders: async () => ({ authorization: `Bearer ${await token.read()}` }),
  };
}
