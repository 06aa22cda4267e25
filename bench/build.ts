// The benchmarks measure Runlet's Node servers as the image ships them: compiled by `npm run build` into dist/
// and started from dist/cli/runlet.js (what bin/runlet.js, the image's entry point, loads). Every run builds
// first, so a dist/ left over from older sources is never what gets measured.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = fileURLToPath(new URL('..', import.meta.url));

/** The compiled CLI; started directly rather than through bin/runlet.js, which falls back to the sources when dist/ is missing. */
export const COMPILED_CLI = join(REPO, 'dist/cli/runlet.js');

/** The environment the image (Dockerfile) gives every process it runs. */
export const IMAGE_ENV = { NODE_ENV: 'production' } as const;

/** `npm run build` in the repository; throws with the compiler's output when it fails. */
export function buildProject(): void {
  const result = spawnSync('npm', ['run', '--silent', 'build'], { cwd: REPO, encoding: 'utf8' });
  if (result.error !== undefined) throw new Error(`could not run \`npm run build\` (is npm on PATH?): ${result.error.message}`);
  if (result.status !== 0) {
    throw new Error(`\`npm run build\` failed (exit ${result.status ?? result.signal}), so there is no current dist/ to measure:\n${result.stdout}${result.stderr}`);
  }
}
