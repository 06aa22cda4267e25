// There are no images here: the test says, per image name, which local programs stand for the
// executables its containers run. A container's argv is its `command` (or the image's entrypoint)
// followed by its `args`; the first element is then looked up in the image's `commands`.
import { basename } from 'node:path';
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { PodSetupError } from './setup-error.ts';

export interface LocalImage {
  /**
   * Executable name (as a container's command names it: full path or basename) → the local argv prefix
   * that runs it, e.g. `{ runlet: [process.execPath, '/repo/cli/runlet.ts'] }`.
   */
  commands: Record<string, readonly string[]>;
  /** What a container that sets no `command` runs (the image's ENTRYPOINT; with CMD when it sets no args). */
  entrypoint?: readonly string[];
  /** Variables the image would carry (e.g. PYTHONPATH); the container's own env overrides them. */
  env?: Readonly<Record<string, string>>;
  /**
   * Files the image has at fixed paths → where the stand-in has them, '' for one it has not. A variable whose
   * value names one is given the local path instead: `LD_PRELOAD=/usr/local/lib/libjemalloc.so.2` becomes the
   * machine's copy, or empty (nothing preloaded) rather than a path the dynamic loader complains of.
   */
  files?: Readonly<Record<string, string>>;
  /** Working directory when the container sets none; default the pod's own directory. */
  workingDir?: string;
  /**
   * A private registry's image: pulled only by a pod whose `imagePullSecrets` name this Secret, which exists
   * in its namespace; any other pod's pull fails as a registry refuses it (ErrImagePull, then ImagePullBackOff).
   */
  pullSecret?: string;
}

/** Image name (exactly as in the pod spec, or without its tag/digest to match every tag) → local stand-in. */
export type ImageTable = Readonly<Record<string, LocalImage>>;

function withoutTag(image: string): string {
  const digest = image.indexOf('@');
  const untagged = digest >= 0 ? image.slice(0, digest) : image;
  const lastSlash = untagged.lastIndexOf('/');
  const colon = untagged.lastIndexOf(':');
  return colon > lastSlash ? untagged.slice(0, colon) : untagged;
}

export function localImage(images: ImageTable, image: string | undefined): LocalImage {
  const found = image === undefined ? undefined : (images[image] ?? images[withoutTag(image)]);
  if (found === undefined) {
    throw new PodSetupError(
      'ErrImageNeverPull',
      `image "${image ?? ''}" has no local stand-in; the test's image table knows: ${Object.keys(images).join(', ') || 'nothing'}`,
    );
  }
  return found;
}

/**
 * Pulls `image` for `pod`, as a kubelet asks a registry: an image with a `pullSecret` needs the pod to name that
 * Secret in its `imagePullSecrets`, and the Secret to exist; otherwise ErrImagePull with containerd's words.
 */
export async function pullImage(
  image: LocalImage,
  pull: { image: string; container: string },
  pod: V1Pod,
  secretExists: (namespace: string, name: string) => Promise<boolean>,
): Promise<void> {
  const imageName = pull.image;
  const secret = image.pullSecret;
  if (secret === undefined) return;
  const named = (pod.spec?.imagePullSecrets ?? []).some((reference) => reference.name === secret);
  if (named && (await secretExists(pod.metadata?.namespace ?? 'default', secret))) return;
  throw new PodSetupError(
    'ErrImagePull',
    `rpc error: code = Unknown desc = failed to pull and unpack image "${imageName}": failed to resolve reference "${imageName}": ` +
      'pull access denied, repository does not exist or may require authorization: server message: insufficient_scope: authorization failed',
    pull,
  );
}

/** The container's argv as written in the pod spec (before local commands are substituted). */
export function declaredArgv(container: V1Container, image: LocalImage): string[] {
  const command = container.command ?? image.entrypoint ?? [];
  const argv = [...command, ...(container.args ?? [])];
  if (argv.length === 0) {
    throw new PodSetupError(
      'CreateContainerConfigError',
      `container "${container.name}" sets no command and image "${container.image ?? ''}" has no entrypoint in the image table`,
    );
  }
  return argv;
}

/** The argv to spawn: the executable replaced by its local stand-in. */
export function localArgv(argv: readonly string[], image: LocalImage, imageName: string | undefined): string[] {
  const [executable, ...rest] = argv;
  const prefix = image.commands[executable!] ?? image.commands[basename(executable!)];
  if (prefix === undefined || prefix.length === 0) {
    throw new PodSetupError(
      'CreateContainerConfigError',
      `image "${imageName ?? ''}" has no local command for "${executable}"; it maps: ${Object.keys(image.commands).join(', ') || 'nothing'}`,
    );
  }
  return [...prefix, ...rest];
}
