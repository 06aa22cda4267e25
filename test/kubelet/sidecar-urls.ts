// Where a test reaches a Runlet pod's sidecar: the local ports standing for its run port and admin port.
// The ports are read from the `runlet sidecar` container's flags (or RUNLET_PORT / RUNLET_ADMIN_PORT), with
// the sidecar's own defaults, exactly as the sidecar itself would resolve them.
import type { V1Container } from '@kubernetes/client-node';
import type { PodRunner } from './pod-runner.ts';

export interface SidecarUrls {
  /** The run interface: `${runUrl}/v4/{project}/{app}/{function}`. */
  runUrl: string;
  /** Probes, metrics, drain. */
  adminUrl: string;
}

const DEFAULT_RUN_PORT = 8000;
const DEFAULT_ADMIN_PORT = 8001;

function isSidecar(container: V1Container): boolean {
  return [...(container.command ?? []), ...(container.args ?? [])].includes('sidecar');
}

function portSetting(container: V1Container, flag: string, variable: string, fallback: number): number {
  const argv = [...(container.command ?? []), ...(container.args ?? [])];
  for (const [index, arg] of argv.entries()) {
    if (arg === flag && argv[index + 1] !== undefined) return Number(argv[index + 1]);
    if (arg.startsWith(`${flag}=`)) return Number(arg.slice(flag.length + 1));
  }
  const fromEnv = container.env?.find((entry) => entry.name === variable)?.value;
  return fromEnv === undefined ? fallback : Number(fromEnv);
}

export function sidecarUrls(pod: PodRunner): SidecarUrls {
  const spec = pod.pod.spec;
  const sidecar = [...(spec?.initContainers ?? []), ...(spec?.containers ?? [])].find(isSidecar);
  if (sidecar === undefined) throw new Error(`pod ${pod.namespace}/${pod.name} has no container running "runlet sidecar"`);
  return {
    runUrl: pod.url(portSetting(sidecar, '--port', 'RUNLET_PORT', DEFAULT_RUN_PORT)),
    adminUrl: pod.url(portSetting(sidecar, '--admin-port', 'RUNLET_ADMIN_PORT', DEFAULT_ADMIN_PORT)),
  };
}
