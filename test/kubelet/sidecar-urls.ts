// Where a test reaches a Runlet pod's sidecar: its run port and admin port, read from the `runlet sidecar`
// container's flags (or RUNLET_PORT / RUNLET_ADMIN_PORT) with the sidecar's own defaults, exactly as the
// sidecar itself resolves them; on the test kubelet, the local ports standing for them.
import type { V1Container, V1PodSpec } from '@kubernetes/client-node';
import type { PodRunner } from './pod-runner.ts';

export interface SidecarPorts {
  runPort: number;
  adminPort: number;
}

export interface SidecarUrls {
  /** The run interface: `${runUrl}/v4/{project}/{app}/{function}`. */
  runUrl: string;
  /** Probes, metrics, drain. */
  adminUrl: string;
}

const DEFAULT_RUN_PORT = 8000;
const DEFAULT_ADMIN_PORT = 8001;

function argvOf(container: V1Container): string[] {
  return [...(container.command ?? []), ...(container.args ?? [])];
}

function portSetting(container: V1Container, flag: string, variable: string, fallback: number): number {
  const argv = argvOf(container);
  for (const [index, arg] of argv.entries()) {
    if (arg === flag && argv[index + 1] !== undefined) return Number(argv[index + 1]);
    if (arg.startsWith(`${flag}=`)) return Number(arg.slice(flag.length + 1));
  }
  const fromEnv = container.env?.find((entry) => entry.name === variable)?.value;
  return fromEnv === undefined ? fallback : Number(fromEnv);
}

/** The pod ports of the pod's `runlet sidecar` container. */
export function sidecarPorts(spec: V1PodSpec | undefined, podName: string): SidecarPorts {
  const sidecar = [...(spec?.initContainers ?? []), ...(spec?.containers ?? [])].find((container) => argvOf(container).includes('sidecar'));
  if (sidecar === undefined) throw new Error(`pod ${podName} has no container running "runlet sidecar"`);
  return {
    runPort: portSetting(sidecar, '--port', 'RUNLET_PORT', DEFAULT_RUN_PORT),
    adminPort: portSetting(sidecar, '--admin-port', 'RUNLET_ADMIN_PORT', DEFAULT_ADMIN_PORT),
  };
}

export function sidecarUrls(pod: PodRunner): SidecarUrls {
  const { runPort, adminPort } = sidecarPorts(pod.pod.spec, `${pod.namespace}/${pod.name}`);
  return { runUrl: pod.url(runPort), adminUrl: pod.url(adminPort) };
}
