// The tools the benchmarks run, installed from Debian's packages when missing, and their versions for the
// report. Only `make bench` installs: nothing here runs in `make test`.
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

/**
 * Every Python process of the benchmarks runs on Debian's interpreter: the FastAPI reference needs Debian's
 * packages, and the runtime it is compared with must run on the same interpreter.
 */
export const PYTHON = '/usr/bin/python3';

interface Requirement {
  what: string;
  packages: string[];
  present: () => boolean;
}

const REQUIREMENTS: Requirement[] = [
  { what: 'nginx', packages: ['nginx'], present: () => commandWorks('nginx', ['-v']) },
  { what: 'wrk', packages: ['wrk'], present: () => commandWorks('wrk', ['-v'], [0, 1]) },
  // The allocator the operator preloads into the pod's sidecar (operator/render/sidecar-container.ts).
  { what: 'jemalloc', packages: ['libjemalloc2'], present: () => findJemalloc() !== undefined },
  {
    what: 'uvicorn and FastAPI for Debian python3',
    packages: ['python3-uvicorn', 'python3-fastapi'],
    present: () => commandWorks(PYTHON, ['-c', 'import uvicorn, fastapi']),
  },
];

/** Installs what is missing (apt-get, as root); throws with the command to run when it cannot. */
export function ensureTools(log: (line: string) => void): void {
  const missing = REQUIREMENTS.filter((requirement) => !requirement.present());
  if (missing.length === 0) return;
  const packages = missing.flatMap((requirement) => requirement.packages);
  const command = `apt-get update && apt-get install -y --no-install-recommends ${packages.join(' ')}`;
  if (process.getuid?.() !== 0) {
    throw new Error(`the benchmarks need ${missing.map((requirement) => requirement.what).join(', ')}; install them as root:\n  ${command}`);
  }
  log(`installing ${packages.join(', ')} (apt-get)`);
  aptGet(['update']);
  for (const name of packages) {
    const policy = execFileSync('apt-cache', ['policy', name], { encoding: 'utf8' });
    if (!/Candidate: (?!\(none\))\S+/.test(policy)) throw new Error(`Debian package ${name} is not available from the configured apt sources:\n${policy}`);
  }
  aptGet(['install', '-y', '--no-install-recommends', ...packages]);
  const stillMissing = REQUIREMENTS.filter((requirement) => !requirement.present());
  if (stillMissing.length > 0) throw new Error(`still missing after apt-get install: ${stillMissing.map((requirement) => requirement.what).join(', ')}`);
}

/** Debian's libjemalloc2 on this machine, as the dynamic loader finds it; undefined if it is not installed. */
function findJemalloc(): string | undefined {
  const cache = execFileSync('ldconfig', ['-p'], { encoding: 'utf8' });
  return /\slibjemalloc\.so\.2 \([^)]*\) => (\S+)/.exec(cache)?.[1];
}

/** Where the sidecars' jemalloc is (ensureTools installs it). */
export function jemallocPath(): string {
  const path = findJemalloc();
  if (path === undefined) throw new Error('libjemalloc.so.2 is not installed (apt-get install libjemalloc2): the pod\'s sidecar preloads it');
  return path;
}

export interface ToolVersions {
  node: string;
  python: string;
  nginx: string;
  uvicorn: string;
  fastapi: string;
  wrk: string;
  autocannon: string;
}

export function toolVersions(): ToolVersions {
  const pythonModules = execFileSync(PYTHON, ['-c', 'import uvicorn, fastapi; print(uvicorn.__version__, fastapi.__version__)'], { encoding: 'utf8' })
    .trim()
    .split(' ');
  const require = createRequire(import.meta.url);
  const autocannonManifest = JSON.parse(readFileSync(require.resolve('autocannon/package.json'), 'utf8')) as { version: string };
  return {
    node: process.version.slice(1),
    python: execFileSync(PYTHON, ['-c', 'import platform; print(platform.python_version())'], { encoding: 'utf8' }).trim(),
    nginx: versionIn(spawnSync('nginx', ['-v'], { encoding: 'utf8' }).stderr, /nginx\/(\S+)/),
    uvicorn: pythonModules[0] ?? 'unknown',
    fastapi: pythonModules[1] ?? 'unknown',
    wrk: versionIn(spawnSync('wrk', ['-v'], { encoding: 'utf8' }).stdout, /wrk (?:debian\/)?(\S+)/),
    autocannon: autocannonManifest.version,
  };
}

function commandWorks(command: string, args: string[], okCodes: number[] = [0]): boolean {
  const result = spawnSync(command, args, { stdio: 'ignore' });
  return result.error === undefined && result.status !== null && okCodes.includes(result.status);
}

function aptGet(args: string[]): void {
  const result = spawnSync('apt-get', args, { stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
  if (result.status !== 0) throw new Error(`apt-get ${args.join(' ')} failed (${result.status ?? result.error?.message}):\n${result.stderr}`);
}

function versionIn(text: string, pattern: RegExp): string {
  return pattern.exec(text)?.[1] ?? 'unknown';
}
