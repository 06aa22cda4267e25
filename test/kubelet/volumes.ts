// Pod volumes as local directories: an emptyDir is an empty directory; a configMap or secret volume a
// directory holding its keys (or the chosen `items`) as files; a projected volume the files of its
// sources (ConfigMap and Secret keys, downward-API fields, and a service-account token: by default, for a source
// naming an audience, a TokenRequest bound to the pod, as a kubelet asks it). Files are written once when the pod
// starts: later changes to a ConfigMap are not projected; a token is written again as a kubelet rotates it, once
// 80% of its lifetime has passed (`tokenWritten`: the pod runner keeps the timers), replacing the file whole. Each
// container's volumeMounts then say which mountPath stands for which directory (rewrite.ts redirects the
// container's paths).
//
// `kube-root-ca.crt`, which Kubernetes publishes in every namespace, does not exist in the fake API server
// (it speaks plain HTTP and has no CA): when a pod asks for it and it is missing, its ca.crt is empty.
import { mkdir, rename, writeFile } from 'node:fs/promises';
import { dirname, join, relative, resolve } from 'node:path';
import type { V1ConfigMap, V1Container, V1KeyToPath, V1Pod, V1Volume, V1VolumeProjection } from '@kubernetes/client-node';
import { configMapFiles, secretFiles, type ObjectSource } from './cluster-objects.ts';
import { fieldValue } from './env.ts';
import type { MountRewrite } from './rewrite.ts';
import { PodSetupError } from './setup-error.ts';

const ROOT_CA_CONFIG_MAP = 'kube-root-ca.crt';

export interface VolumeContext {
  pod: V1Pod;
  source: ObjectSource;
  /** The token a projected serviceAccountToken source holds (a real API server's TokenRequest is asynchronous). */
  serviceAccountToken: ServiceAccountTokenSource;
  /** A token was written; `rewrite` writes a new one in its place (the kubelet's rotation). */
  tokenWritten?(token: { expirationSeconds: number; rewrite: () => Promise<void> }): void;
}

/** The token of a projected serviceAccountToken source: its audience and lifetime as the pod asks them. */
export type ServiceAccountTokenSource = (pod: V1Pod, audience: string | undefined, expirationSeconds: number) => string | Promise<string>;

/** A projected token's lifetime when the pod names none: the API server's default for TokenRequest. */
export const DEFAULT_TOKEN_EXPIRATION_SECONDS = 3600;

type Files = Map<string, Buffer>;

async function writeFiles(dir: string, files: Files, items: V1KeyToPath[] | undefined, what: string): Promise<void> {
  const chosen = items ?? [...files.keys()].map((key) => ({ key, path: key }));
  for (const item of chosen) {
    const content = files.get(item.key);
    if (content === undefined) throw new PodSetupError('ContainerCreating', `${what} has no key "${item.key}"`);
    await writeFileInVolume(dir, item.path, content, what);
  }
}

async function writeFileInVolume(dir: string, path: string, content: Buffer | string, what: string): Promise<void> {
  const target = resolve(dir, path);
  if (relative(dir, target).startsWith('..')) throw new PodSetupError('ContainerCreating', `${what}: path "${path}" leaves the volume`);
  await mkdir(dirname(target), { recursive: true });
  // Replaced whole, as the kubelet swaps a projected volume's files: a reader never sees half of a new token.
  await writeFile(`${target}.writing`, content);
  await rename(`${target}.writing`, target);
}

async function configMapOrRootCa(source: ObjectSource, namespace: string, name: string): Promise<V1ConfigMap | undefined> {
  const configMap = await source.configMap(namespace, name);
  if (configMap === undefined && name === ROOT_CA_CONFIG_MAP) return { data: { 'ca.crt': '' } };
  return configMap;
}

/** The files of a ConfigMap or Secret reference; undefined when it is missing but optional. */
async function referencedFiles(
  kind: 'ConfigMap' | 'Secret',
  name: string,
  optional: boolean | undefined,
  context: VolumeContext,
  what: string,
): Promise<Files | undefined> {
  const namespace = context.pod.metadata?.namespace ?? 'default';
  const object = kind === 'ConfigMap' ? await configMapOrRootCa(context.source, namespace, name) : await context.source.secret(namespace, name);
  if (object !== undefined) return kind === 'ConfigMap' ? configMapFiles(object as V1ConfigMap) : secretFiles(object);
  if (optional === true) return undefined;
  throw new PodSetupError('ContainerCreating', `${what}: ${kind} "${name}" (namespace ${namespace}) not found`);
}

async function fillProjection(projection: V1VolumeProjection, dir: string, context: VolumeContext, what: string): Promise<void> {
  if (projection.configMap !== undefined) {
    const { name = '', optional, items } = projection.configMap;
    const files = await referencedFiles('ConfigMap', name, optional, context, what);
    if (files !== undefined) await writeFiles(dir, files, items, `${what}: ConfigMap "${name}"`);
  } else if (projection.secret !== undefined) {
    const { name = '', optional, items } = projection.secret;
    const files = await referencedFiles('Secret', name, optional, context, what);
    if (files !== undefined) await writeFiles(dir, files, items, `${what}: Secret "${name}"`);
  } else if (projection.downwardAPI !== undefined) {
    for (const item of projection.downwardAPI.items ?? []) {
      if (item.fieldRef === undefined) throw new PodSetupError('ContainerCreating', `${what}: only fieldRef downwardAPI items are supported`);
      await writeFileInVolume(dir, item.path, fieldValue(context.pod, item.fieldRef.fieldPath), what);
    }
  } else if (projection.serviceAccountToken !== undefined) {
    const { path, audience } = projection.serviceAccountToken;
    const expirationSeconds = projection.serviceAccountToken.expirationSeconds ?? DEFAULT_TOKEN_EXPIRATION_SECONDS;
    const write = async (): Promise<void> => writeFileInVolume(dir, path, await context.serviceAccountToken(context.pod, audience, expirationSeconds), what);
    await write();
    context.tokenWritten?.({ expirationSeconds, rewrite: write });
  } else {
    throw new PodSetupError('ContainerCreating', `${what}: unsupported projected source ${JSON.stringify(projection)}`);
  }
}

async function fillVolume(volume: V1Volume, dir: string, context: VolumeContext): Promise<void> {
  const what = `volume "${volume.name}"`;
  if (volume.emptyDir !== undefined) return;
  if (volume.configMap !== undefined) {
    const { name = '', optional, items } = volume.configMap;
    const files = await referencedFiles('ConfigMap', name, optional, context, what);
    if (files !== undefined) await writeFiles(dir, files, items, `${what}: ConfigMap "${name}"`);
  } else if (volume.secret !== undefined) {
    const { secretName = '', optional, items } = volume.secret;
    const files = await referencedFiles('Secret', secretName, optional, context, what);
    if (files !== undefined) await writeFiles(dir, files, items, `${what}: Secret "${secretName}"`);
  } else if (volume.projected !== undefined) {
    for (const projection of volume.projected.sources ?? []) await fillProjection(projection, dir, context, what);
  } else {
    throw new PodSetupError('ContainerCreating', `${what}: only emptyDir, configMap, secret and projected volumes are supported by the test kubelet`);
  }
}

/** Creates every volume of the pod under `volumesDir`; returns volume name → local directory. */
export async function materializeVolumes(volumesDir: string, context: VolumeContext): Promise<Map<string, string>> {
  const dirs = new Map<string, string>();
  for (const volume of context.pod.spec?.volumes ?? []) {
    const dir = join(volumesDir, volume.name);
    await mkdir(dir, { recursive: true });
    await fillVolume(volume, dir, context);
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
