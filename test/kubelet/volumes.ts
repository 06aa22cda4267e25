// Pod volumes as local directories: an emptyDir is an empty directory, a configMap or secret volume a
// directory holding its keys (or the chosen `items`) as files, written once when the pod starts (later
// changes to the ConfigMap are not projected). Each container's volumeMounts then say which mountPath
// stands for which directory (see rewrite.ts for how the container's paths are redirected).
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join, relative, resolve } from 'node:path';
import type { V1Container, V1KeyToPath, V1Pod, V1Volume } from '@kubernetes/client-node';
import { configMapFiles, secretFiles, type ObjectSource } from './cluster-objects.ts';
import type { MountRewrite } from './rewrite.ts';
import { PodSetupError } from './setup-error.ts';

async function writeFiles(dir: string, files: Map<string, Buffer>, items: V1KeyToPath[] | undefined, what: string): Promise<void> {
  const chosen = items ?? [...files.keys()].map((key) => ({ key, path: key }));
  for (const item of chosen) {
    const content = files.get(item.key);
    if (content === undefined) throw new PodSetupError('ContainerCreating', `${what} has no key "${item.key}"`);
    const target = resolve(dir, item.path);
    if (relative(dir, target).startsWith('..')) throw new PodSetupError('ContainerCreating', `${what}: item path "${item.path}" leaves the volume`);
    await mkdir(dirname(target), { recursive: true });
    await writeFile(target, content);
  }
}

async function fillVolume(volume: V1Volume, dir: string, namespace: string, source: ObjectSource): Promise<void> {
  if (volume.emptyDir !== undefined) return;
  if (volume.configMap !== undefined) {
    const name = volume.configMap.name ?? '';
    const configMap = await source.configMap(namespace, name);
    const what = `volume "${volume.name}": ConfigMap "${name}" (namespace ${namespace})`;
    if (configMap === undefined) {
      if (volume.configMap.optional === true) return;
      throw new PodSetupError('ContainerCreating', `${what} not found`);
    }
    await writeFiles(dir, configMapFiles(configMap), volume.configMap.items, what);
    return;
  }
  if (volume.secret !== undefined) {
    const name = volume.secret.secretName ?? '';
    const secret = await source.secret(namespace, name);
    const what = `volume "${volume.name}": Secret "${name}" (namespace ${namespace})`;
    if (secret === undefined) {
      if (volume.secret.optional === true) return;
      throw new PodSetupError('ContainerCreating', `${what} not found`);
    }
    await writeFiles(dir, secretFiles(secret), volume.secret.items, what);
    return;
  }
  throw new PodSetupError('ContainerCreating', `volume "${volume.name}": only emptyDir, configMap and secret volumes are supported by the test kubelet`);
}

/** Creates every volume of the pod under `volumesDir`; returns volume name → local directory. */
export async function materializeVolumes(pod: V1Pod, volumesDir: string, source: ObjectSource): Promise<Map<string, string>> {
  const namespace = pod.metadata?.namespace ?? 'default';
  const dirs = new Map<string, string>();
  for (const volume of pod.spec?.volumes ?? []) {
    const dir = join(volumesDir, volume.name);
    await mkdir(dir, { recursive: true });
    await fillVolume(volume, dir, namespace, source);
    dirs.set(volume.name, dir);
  }
  return dirs;
}

export function containerMounts(container: V1Container, volumeDirs: ReadonlyMap<string, string>): MountRewrite[] {
  return (container.volumeMounts ?? []).map((mount) => {
    const dir = volumeDirs.get(mount.name);
    if (dir === undefined) {
      throw new PodSetupError('CreateContainerConfigError', `container "${container.name}" mounts volume "${mount.name}", which the pod does not declare`);
    }
    return { mountPath: mount.mountPath, localPath: mount.subPath ? join(dir, mount.subPath) : dir };
  });
}
