// What a real Node of node.sh needs beside the kubelet and kube-proxy, run by node.sh inside the Node's network
// namespace as one process of its supervised group: the cluster DNS its pods resolve Services with
// (cluster-dns.ts), and the proxy the API server reaches the kubelet and pods through (egress-proxy.ts).
//
//   node node-services.ts --kubeconfig FILE --dns-address IP --cluster-domain DOMAIN --egress-socket PATH
//
// The kubeconfig is kube-proxy's: system:node-proxier may list Services, as a cluster DNS must.
import { parseArgs } from 'node:util';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { startClusterDns } from './cluster-dns.ts';
import { startEgressProxy } from './egress-proxy.ts';

const DNS_PORT = 53;

const { values } = parseArgs({
  options: {
    kubeconfig: { type: 'string' },
    'dns-address': { type: 'string' },
    'cluster-domain': { type: 'string' },
    'egress-socket': { type: 'string' },
  },
  strict: true,
});
const required = (name: keyof typeof values): string => {
  const value = values[name];
  if (value === undefined || value === '') throw new Error(`node-services: --${name} is required`);
  return value;
};

const kubeConfig = new KubeConfig();
kubeConfig.loadFromFile(required('kubeconfig'));
const core = kubeConfig.makeApiClient(CoreV1Api);
const log = (message: string): void => void process.stdout.write(`${new Date().toISOString()} ${message}\n`);
const onError = (error: Error): void => log(`error: ${error.message}`);

const dns = await startClusterDns({
  address: required('dns-address'),
  port: DNS_PORT,
  clusterDomain: required('cluster-domain'),
  // A list by name, not a get: list is what system:node-proxier may do.
  lookup: async (namespace, name) => {
    const { items } = await core.listNamespacedService({ namespace, fieldSelector: `metadata.name=${name}` });
    return items[0]?.spec?.clusterIP;
  },
  onError,
});
const egress = await startEgressProxy({ socketPath: required('egress-socket'), onError });
log(`cluster DNS on ${required('dns-address')}:${dns.port}, API server egress proxy on ${required('egress-socket')}`);

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    void Promise.all([dns.close(), egress.close()]).then(() => process.exit(0));
  });
}
