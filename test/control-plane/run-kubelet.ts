// `npm run kubelet`: the test kubelet as the Node of the cluster KUBECONFIG names (an admin kubeconfig, as
// `eval "$(test/control-plane/control-plane.sh up)"` exports), until Ctrl-C. It runs the pods bound to it as
// local processes (runlet/runlet and runlet/python-runtime as this checkout's programs), and prints, for each
// pod it starts, which local address stands for each of its ports: where to reach a Service's pod, since this
// cluster has neither a pod network nor an ingress controller.
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import type { PodRunner } from '../kubelet/index.ts';
import { localImages, startControlPlaneKubelet } from './process-kubelet.ts';

/** How often the pods running here are looked at for new ones to print. */
const REPORT_INTERVAL_MS = 500;

function describePorts(pod: PodRunner): string {
  return [...pod.ports].map(([podPort, localPort]) => `${podPort} → http://127.0.0.1:${localPort}`).join(', ');
}

async function main(): Promise<void> {
  if (!process.env.KUBECONFIG) {
    throw new Error('KUBECONFIG is not set: start the control plane first, eval "$(test/control-plane/control-plane.sh up)"');
  }
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromDefault();
  const server = kubeConfig.getCurrentCluster()?.server;
  if (server === undefined) throw new Error(`the kubeconfig ${process.env.KUBECONFIG} names no cluster`);
  const workDir = await mkdtemp(join(tmpdir(), 'runlet-kubelet-'));
  // The operator's pods dial app pods at their IPs (the autoscaler's load scrapes): the kubelet maps them.
  const podNetworkFile = join(workDir, 'pod-network.json');
  const kubelet = await startControlPlaneKubelet({ kubeConfig, server, workDir, podNetworkFile, images: localImages(server, undefined, {}, podNetworkFile) });
  console.log(`kubelet: node ${kubelet.nodeName} of ${server}; pod logs under ${workDir} (Ctrl-C stops it and its pods)`);

  const reported = new Set<PodRunner>();
  const report = setInterval(() => {
    for (const pod of kubelet.pods()) {
      if (reported.has(pod) || pod.ports.size === 0) continue;
      reported.add(pod);
      console.log(`pod ${pod.namespace}/${pod.name}: ${describePorts(pod)} (log ${pod.log.path})`);
    }
  }, REPORT_INTERVAL_MS);

  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  clearInterval(report);
  await kubelet.stop();
}

main().catch((error: unknown) => {
  console.error(`kubelet: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
