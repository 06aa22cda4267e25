// From a container of the pod spec to the local process that stands for it: argv, environment and
// working directory, with the image's local commands substituted and the pod's paths and ports rewritten.
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import type { ObjectSource } from './cluster-objects.ts';
import { containerEnv, expandReferences } from './env.ts';
import { declaredArgv, localArgv, localImage, pullImage, type ImageTable } from './images.ts';
import { inClusterEnv, type InClusterApi } from './in-cluster.ts';
import { rewriteArgv, rewriteEnvValue, rewritePathValue, type Rewrites } from './rewrite.ts';
import { containerMounts } from './volumes.ts';

export interface ContainerLaunch {
  argv: string[];
  env: Record<string, string>;
  cwd: string;
}

/** What a container gets from the machine: enough to find programs, nothing else of the test's environment. */
const HOST_VARIABLES = ['PATH', 'HOME', 'TMPDIR', 'LANG', 'LC_ALL', 'TZ'];

export interface LaunchContext {
  pod: V1Pod;
  images: ImageTable;
  source: ObjectSource;
  volumeDirs: ReadonlyMap<string, string>;
  ports: ReadonlyMap<number, number>;
  /** Working directory when neither the container nor its image names one. */
  podDir: string;
  /** Set on a real control plane: the API server as containers reach it. */
  inClusterApi?: InClusterApi;
}

export async function containerLaunch(container: V1Container, context: LaunchContext): Promise<ContainerLaunch> {
  const image = localImage(context.images, container.image);
  await pullImage(image, { image: container.image ?? '', container: container.name }, context.pod, async (namespace, name) => (await context.source.secret(namespace, name)) !== undefined);
  const mounts = containerMounts(container, context.volumeDirs);
  // The process shares the host's /tmp, where the tests' own files live: a volume mounted there cannot stand
  // in for it by rewriting paths (every /tmp path of the image table would move). TMPDIR names it instead.
  const tmp = mounts.find((mount) => mount.mountPath.replace(/\/+$/, '') === '/tmp');
  const rewrites: Rewrites = { ports: context.ports, mounts: mounts.filter((mount) => mount !== tmp) };
  const own = await containerEnv(container, context.pod, context.source);
  const [executable, ...args] = declaredArgv(container, image).map((arg) => expandReferences(arg, own));

  const env: Record<string, string> = {};
  for (const name of HOST_VARIABLES) {
    const value = process.env[name];
    if (value !== undefined) env[name] = value;
  }
  env.HOSTNAME = context.pod.metadata?.name ?? '';
  if (tmp !== undefined) env.TMPDIR = tmp.localPath;
  if (context.inClusterApi !== undefined) {
    Object.assign(env, inClusterEnv(context.inClusterApi, rewrites));
  }
  // The image's variables are seen by the container too: a path under one of its mounts is redirected.
  for (const [name, value] of Object.entries(image.env ?? {})) env[name] = rewriteEnvValue(name, value, rewrites);
  for (const [name, value] of own) env[name] = rewriteEnvValue(name, value, rewrites);
  // Own keys only: a value such as "constructor" names no file.
  const files = image.files ?? {};
  for (const [name, value] of Object.entries(env)) {
    if (Object.hasOwn(files, value)) env[name] = files[value]!;
  }

  const workingDir = container.workingDir === undefined ? undefined : rewritePathValue(container.workingDir, rewrites);
  return {
    argv: localArgv([executable!, ...rewriteArgv(args, rewrites)], image, container.image),
    env,
    cwd: workingDir ?? image.workingDir ?? context.podDir,
  };
}
