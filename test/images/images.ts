// The images `make images` builds, for the tests that run them: which engine the machine has (or why there is
// none), building them through images/images.sh (seconds when its caches and the engine's layer cache hold
// the same inputs), and their sizes.
import { execFile, execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { RUNLET_IMAGE_REPOSITORY, RUNLET_VERSION } from '../../cli/images.ts';

const run = promisify(execFile);
export const IMAGES_SCRIPT = resolve(import.meta.dirname, '../../images/images.sh');
/** A fresh build downloads Debian packages and the npm dependencies: minutes on a loaded 2-core machine. */
export const BUILD_TIMEOUT_MS = 15 * 60_000;

export type Engine = 'docker' | 'podman';

/**
 * The engine that can run the images here, or why none can. Only looks (`make images` installs podman where
 * there is no engine): docker when its daemon answers, else podman; buildah builds but runs no containers.
 */
export function imageEngine(env: NodeJS.ProcessEnv = process.env): { engine: Engine } | { skipReason: string } {
  const onPath = (tool: string) => (env.PATH ?? '').split(':').some((dir) => existsSync(join(dir, tool)));
  if (onPath('docker') && answers('docker', ['info'])) return { engine: 'docker' };
  if (onPath('podman')) return { engine: 'podman' };
  if (onPath('buildah')) return { skipReason: 'only buildah is installed: it builds images but runs no containers (make images installs podman where apt can)' };
  return { skipReason: 'no docker daemon, podman or buildah: run `make images` (installs podman from Debian packages, with apt as root or sudo)' };
}

function answers(command: string, args: string[]): boolean {
  try {
    execFileSync(command, args, { stdio: 'ignore', timeout: 10_000 });
    return true;
  } catch {
    return false;
  }
}

/** Builds both images under their release names; returns how long it took, and the script's log. */
export async function buildImages(): Promise<{ seconds: number; log: string }> {
  const started = performance.now();
  try {
    // The names the tests run (cli/images.ts), whatever IMAGE_REPO the environment names for a push.
    const env = { ...process.env, IMAGE_REPO: dirname(RUNLET_IMAGE_REPOSITORY) };
    const { stderr } = await run(IMAGES_SCRIPT, ['build', RUNLET_VERSION], { env, timeout: BUILD_TIMEOUT_MS, maxBuffer: 64 * 1024 * 1024 });
    return { seconds: (performance.now() - started) / 1000, log: stderr };
  } catch (error) {
    const { stderr } = error as { stderr?: string };
    throw new Error(`images/images.sh build failed:\n${(stderr ?? '').split('\n').slice(-40).join('\n')}`, { cause: error });
  }
}

/** The image's USER, as the engine reports it. */
export async function imageUser(engine: Engine, image: string): Promise<string> {
  const { stdout } = await run(engine, ['image', 'inspect', '--format', '{{.Config.User}}', image]);
  return stdout.trim();
}

/** The image's size as the engine reports it (uncompressed, all layers). */
export async function imageSizeBytes(engine: Engine, image: string): Promise<number> {
  const { stdout } = await run(engine, ['image', 'inspect', '--format', '{{.Size}}', image]);
  const size = Number(stdout.trim());
  if (!Number.isFinite(size) || size <= 0) throw new Error(`${engine} image inspect ${image} gave no size: ${stdout}`);
  return size;
}
