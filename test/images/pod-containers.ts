// A pod the operator renders, run as containers through testcontainers the way a kubelet would run them: each
// container's image, command, args and env; its securityContext (numeric user and group, read-only root, every
// capability dropped, no privilege escalation; seccomp is the engine's default, as RuntimeDefault asks); its
// emptyDirs as tmpfs mounts (mode 0777, as the kubelet makes an emptyDir without fsGroup); the code ConfigMap as
// a read-only bind mount of the app's folder; a PersistentVolumeClaim (a StatefulSet's volumeClaimTemplates) as a
// writable bind mount of a folder the test keeps across restarts; and one network namespace for the whole pod, with no network in
// it but its loopback: calls are made from inside the pod, over 127.0.0.1, so no traffic leaves it and the
// rendered ports are used as they are.
//
// podman's Docker API, given a read-only root, also mounts writable tmpfs at /tmp, /var/tmp and /run (podman's
// --read-only-tmpfs, which that API cannot turn off; a kubelet mounts nothing of the kind). Where the pod renders
// no volume there, a read-only tmpfs is mounted instead, so a container can write only to its rendered volumes,
// as under a kubelet (those folders of the images hold nothing the images read).
//
// What a kubelet gives that this does not: the service account token volume (the tests run the sidecar with
// `--run-store sqlite`, which needs no API server), probes, restarts, and startup order (the containers start
// in the order given).
import type { V1Container, V1EnvVar, V1ObjectMeta, V1PodSecurityContext, V1PodTemplateSpec, V1Volume } from '@kubernetes/client-node';
import { GenericContainer, type StartedTestContainer } from 'testcontainers';

/** Where podman puts writable tmpfs under a read-only root (see the header). */
const ENGINE_WRITABLE_PATHS = ['/tmp', '/var/tmp', '/run'];

/** GenericContainer plus the one securityContext field it has no method for. */
class KubeletLikeContainer extends GenericContainer {
  withReadOnlyRootFilesystem(): this {
    this.hostConfig.ReadonlyRootfs = true;
    return this;
  }
}

export interface PodOptions {
  /** The folder mounted for each configMap volume, by volume name. */
  configMapDirs: Record<string, string>;
  /** The folder mounted for each claim (a volumeClaimTemplate's name), writable; the test owns it (fsGroup is not applied). */
  claimDirs?: Record<string, string>;
  /** Secrets the env's secretKeyRefs read, by name then key. */
  secrets?: Record<string, Record<string, string>>;
  /** What the downward API would give (metadata.name, metadata.namespace). */
  podName: string;
  namespace: string;
  /** Replaces a container's args (by container name), e.g. to run the sidecar on another run store. */
  args?: Record<string, (args: string[]) => string[]>;
}

export interface RunningPod {
  container(name: string): StartedTestContainer;
  /** Runs a command in a container; throws with its output unless it exits 0. */
  exec(name: string, command: string[]): Promise<string>;
  stop(): Promise<void>;
}

/** A Deployment or a StatefulSet: what holds a pod template (and, for a StatefulSet, its claims). */
export interface PodWorkload {
  metadata?: V1ObjectMeta;
  spec?: { template: V1PodTemplateSpec; volumeClaimTemplates?: Array<{ metadata?: V1ObjectMeta }> };
}

/** The pod template's containers (native sidecars first, as the kubelet starts them), as testcontainers. */
export function podContainers(workload: PodWorkload, options: PodOptions): Array<{ name: string; container: KubeletLikeContainer }> {
  const spec = workload.spec?.template.spec;
  if (spec === undefined) throw new Error(`${workload.metadata?.name} has no pod template`);
  // A StatefulSet's pod gets a volume of each claim template's name, as its controller adds them.
  const claims = (workload.spec?.volumeClaimTemplates ?? []).map((claim): V1Volume => ({ name: claim.metadata!.name!, persistentVolumeClaim: { claimName: claim.metadata!.name! } }));
  const volumes = new Map([...(spec.volumes ?? []), ...claims].map((volume) => [volume.name, volume]));
  return [...(spec.initContainers ?? []), ...spec.containers].map((container) => ({
    name: container.name,
    container: toTestContainer(container, volumes, options, spec.securityContext ?? {}),
  }));
}

/** The user and group fields a container takes from the pod's securityContext unless it sets its own, as the kubelet merges them. */
function toTestContainer(container: V1Container, volumes: Map<string, V1Volume>, options: PodOptions, pod: V1PodSecurityContext): KubeletLikeContainer {
  const what = `container ${container.name}`;
  const security = container.securityContext;
  const uid = security?.runAsUser ?? pod.runAsUser;
  const runAsNonRoot = (security?.runAsNonRoot ?? pod.runAsNonRoot) === true;
  if (uid === undefined || (runAsNonRoot && uid === 0)) throw new Error(`${what}: runAsNonRoot needs a numeric non-root runAsUser, got ${uid}`);
  let result = new KubeletLikeContainer(required(container.image, `${what}: image`)).withUser(`${uid}:${security?.runAsGroup ?? pod.runAsGroup ?? uid}`);
  if (security?.readOnlyRootFilesystem === true) result = result.withReadOnlyRootFilesystem();
  if (security?.allowPrivilegeEscalation === false) result = result.withSecurityOpt('no-new-privileges');
  const dropped = security?.capabilities?.drop ?? [];
  if (dropped.length > 0) result = result.withDroppedCapabilities(...dropped);
  if (container.command !== undefined) result = result.withEntrypoint(container.command);
  const args = container.args ?? [];
  result = result.withCommand(options.args?.[container.name]?.(args) ?? args);
  result = result.withEnvironment(environment(container.env ?? [], options, what));
  const mountPaths = new Set((container.volumeMounts ?? []).map((mount) => mount.mountPath));
  if (security?.readOnlyRootFilesystem === true) {
    for (const path of ENGINE_WRITABLE_PATHS) if (!mountPaths.has(path)) result = result.withTmpFs({ [path]: 'ro' });
  }
  for (const mount of container.volumeMounts ?? []) {
    const volume = volumes.get(mount.name);
    if (volume === undefined) throw new Error(`${what}: volumeMount ${mount.name} names no volume of the pod`);
    if (volume.emptyDir !== undefined) result = result.withTmpFs({ [mount.mountPath]: 'rw,mode=0777' });
    else if (volume.configMap !== undefined) {
      const source = required(options.configMapDirs[volume.name], `${what}: a folder for configMap volume ${volume.name}`);
      result = result.withBindMounts([{ source, target: mount.mountPath, mode: 'ro' }]);
    } else if (volume.persistentVolumeClaim !== undefined) {
      const source = required(options.claimDirs?.[volume.name], `${what}: a folder for claim ${volume.name}`);
      result = result.withBindMounts([{ source, target: mount.mountPath, mode: 'rw' }]);
    }
    // A projected service account token: nothing to mount without an API server (see the header).
  }
  return result;
}

/** Env as the kubelet resolves it: literals, the downward API's name and namespace, the given Secrets' keys; other optional Secret keys left out. */
function environment(env: V1EnvVar[], options: PodOptions, what: string): Record<string, string> {
  const resolved: Record<string, string> = {};
  for (const variable of env) {
    const field = variable.valueFrom?.fieldRef?.fieldPath;
    if (variable.value !== undefined) resolved[variable.name] = variable.value;
    else if (field === 'metadata.name') resolved[variable.name] = options.podName;
    else if (field === 'metadata.namespace') resolved[variable.name] = options.namespace;
    else if (secretValue(variable, options) !== undefined) resolved[variable.name] = secretValue(variable, options)!;
    else if (variable.valueFrom?.secretKeyRef?.optional === true) continue;
    else throw new Error(`${what}: env ${variable.name} has a source this translation does not know: ${JSON.stringify(variable.valueFrom)}`);
  }
  return resolved;
}

function secretValue(variable: V1EnvVar, options: PodOptions): string | undefined {
  const reference = variable.valueFrom?.secretKeyRef;
  return reference?.name === undefined ? undefined : options.secrets?.[reference.name]?.[reference.key];
}

/**
 * Starts the containers in order, the first in a network namespace of its own with loopback only (`none`),
 * the others joining it (`container:<id>`), as a pod's containers share its sandbox's.
 */
export async function startPod(containers: Array<{ name: string; container: GenericContainer }>): Promise<RunningPod> {
  const started = new Map<string, StartedTestContainer>();
  const pod: RunningPod = {
    container(name) {
      const container = started.get(name);
      if (container === undefined) throw new Error(`the pod has no started container ${name} (has ${[...started.keys()].join(', ')})`);
      return container;
    },
    async exec(name, command) {
      const result = await pod.container(name).exec(command);
      if (result.exitCode !== 0) throw new Error(`${command.join(' ')} in ${name} exited ${result.exitCode}: ${result.output}`);
      return result.stdout;
    },
    async stop() {
      // The containers that joined the first one's namespace go first.
      for (const container of [...started.values()].reverse()) await container.stop({ timeout: 10_000 });
    },
  };
  try {
    for (const { name, container } of containers) {
      const first = started.size === 0 ? undefined : [...started.values()][0]!;
      started.set(name, await container.withNetworkMode(first === undefined ? 'none' : `container:${first.getId()}`).start());
    }
  } catch (error) {
    await pod.stop();
    throw error;
  }
  return pod;
}

function required<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`${what} is missing`);
  return value;
}
