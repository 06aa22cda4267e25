// The benchmarks measure Runlet's Node servers as the image ships them: compiled by `npm run build` into dist/
// and started from dist/cli/runlet.js (what bin/runlet.js, the image's entry point, loads). Every run builds
// first, so a dist/ left over from older sources is never what gets measured.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = fileURLToPath(new URL('..', import.meta.url));

/** The compiled CLI of a checkout; started directly rather than through bin/runlet.js, which falls back to the sources when dist/ is missing. */
export function compiledCli(checkout: string): string {
  return join(checkout, 'dist/cli/runlet.js');
}

/** This checkout's compiled CLI: what every scenario measures. */
export const COMPILED_CLI = compiledCli(REPO);

/** The environment the image (Dockerfile) gives every process it runs. */
export const IMAGE_ENV = { NODE_ENV: 'production' } as const;

/**
 * `npm run build` in the repository, or in another checkout of it (the warm-path A/B's baseline worktree);
 * throws with the compiler's output when it fails.
 */
export function buildProject(checkout: string = REPO): void {
  const result = spawnSync('npm', ['run', '--silent', 'build'], { cwd: checkout, encoding: 'utf8' });
  if (result.error !== undefined) throw new Error(`could not run \`npm run build\` in ${checkout} (is npm on PATH?): ${result.error.message}`);
  if (result.status !== 0) {
    throw new Error(`\`npm run build\` in ${checkout} failed (exit ${result.status ?? result.signal}), so there is no current dist/ to measure:\n${result.stdout}${result.stderr}`);
  }
}
