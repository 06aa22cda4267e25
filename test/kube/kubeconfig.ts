// Client configuration pointing at the fake API server: a client-node KubeConfig for in-process clients,
// and kubeconfig YAML for child processes (KUBECONFIG=path). The server speaks plain HTTP, which
// client-node only allows with insecure-skip-tls-verify set.

import { writeFile } from 'node:fs/promises';
import { KubeConfig } from '@kubernetes/client-node';
import { stringify } from 'yaml';

export interface ClientOptions {
  /** Bearer token the client sends; the fake server accepts any. */
  token?: string;
  /** Default namespace of the context. */
  namespace?: string;
}

const CLUSTER = 'runlet-fake';
const USER = 'runlet-fake-user';
const CONTEXT = 'runlet-fake';

export function kubeConfigFor(serverUrl: string, options: ClientOptions = {}): KubeConfig {
  const config = new KubeConfig();
  config.loadFromOptions({
    clusters: [{ name: CLUSTER, server: serverUrl, skipTLSVerify: true }],
    users: [{ name: USER, token: options.token ?? 'fake-token' }],
    contexts: [{ name: CONTEXT, cluster: CLUSTER, user: USER, namespace: options.namespace ?? 'default' }],
    currentContext: CONTEXT,
  });
  return config;
}

export function kubeconfigYaml(serverUrl: string, options: ClientOptions = {}): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: CLUSTER, cluster: { server: serverUrl, 'insecure-skip-tls-verify': true } }],
    users: [{ name: USER, user: { token: options.token ?? 'fake-token' } }],
    contexts: [{ name: CONTEXT, context: { cluster: CLUSTER, user: USER, namespace: options.namespace ?? 'default' } }],
    'current-context': CONTEXT,
  });
}

export async function writeKubeconfigFile(path: string, serverUrl: string, options: ClientOptions = {}): Promise<void> {
  await writeFile(path, kubeconfigYaml(serverUrl, options), { mode: 0o600 });
}
