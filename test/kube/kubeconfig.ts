// Client configuration pointing at the fake API server: a client-node KubeConfig for in-process clients,
// and kubeconfig YAML for child processes (KUBECONFIG=path), trusting the server's certificate (`ca`, PEM).
// A plain-HTTP URL (a test's proxy in front of the server) needs insecure-skip-tls-verify for client-node.

import { writeFile } from 'node:fs/promises';
import { KubeConfig } from '@kubernetes/client-node';
import { stringify } from 'yaml';

export interface ClientOptions {
  /** Bearer token the client sends; the fake server accepts any. */
  token?: string;
  /** Default namespace of the context. */
  namespace?: string;
}

/** How a client trusts the server: its CA in PEM, or nothing for a plain-HTTP URL. */
function trust(serverUrl: string, ca: string | undefined): { caData?: string; skipTLSVerify?: boolean } {
  if (serverUrl.startsWith('http:') || ca === undefined) return { skipTLSVerify: true };
  return { caData: Buffer.from(ca).toString('base64') };
}

const CLUSTER = 'runlet-fake';
const USER = 'runlet-fake-user';
const CONTEXT = 'runlet-fake';

export function kubeConfigFor(serverUrl: string, options: ClientOptions = {}, ca?: string): KubeConfig {
  const config = new KubeConfig();
  config.loadFromOptions({
    clusters: [{ name: CLUSTER, server: serverUrl, ...trust(serverUrl, ca) }],
    users: [{ name: USER, token: options.token ?? 'fake-token' }],
    contexts: [{ name: CONTEXT, cluster: CLUSTER, user: USER, namespace: options.namespace ?? 'default' }],
    currentContext: CONTEXT,
  });
  return config;
}

export function kubeconfigYaml(serverUrl: string, options: ClientOptions = {}, ca?: string): string {
  const { caData, skipTLSVerify } = trust(serverUrl, ca);
  const cluster = caData === undefined ? { server: serverUrl, 'insecure-skip-tls-verify': skipTLSVerify } : { server: serverUrl, 'certificate-authority-data': caData };
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: CLUSTER, cluster }],
    users: [{ name: USER, user: { token: options.token ?? 'fake-token' } }],
    contexts: [{ name: CONTEXT, context: { cluster: CLUSTER, user: USER, namespace: options.namespace ?? 'default' } }],
    'current-context': CONTEXT,
  });
}

export async function writeKubeconfigFile(path: string, serverUrl: string, options: ClientOptions = {}, ca?: string): Promise<void> {
  await writeFile(path, kubeconfigYaml(serverUrl, options, ca), { mode: 0o600 });
}
