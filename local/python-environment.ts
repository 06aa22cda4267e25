// A virtual environment per app for `runlet dev`: the app's requirements (app-requirements.ts) installed by pip
// for the interpreter chosen, under DATA_DIR/environments, reused while the requirements and the interpreter are
// unchanged, built afresh when either changes.
//
// An environment's folder is named by its key (the app, the interpreter and the requirements, hashed) and is
// built where it stays: a venv cannot be moved (pip writes the folder's absolute path into the scripts it
// installs), so it is not built elsewhere and renamed. A stamp holding the key is written last, atomically:
// a folder without it (an install that failed or was killed) is never used, and is removed before the next
// build. Once a new environment is complete the app's older ones are removed; a build that fails leaves the
// previous one as it was, so reverting the change brings it back without an install.
//
// pip runs as it would by hand: its configuration (PIP_INDEX_URL, pip.conf) applies, and the packages' own
// build code runs as the user (docs in /work/notes/dev-deps.md; README, `runlet dev`).
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { chmod, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import type { Logger } from 'pino';
import type { Requirements } from './app-requirements.ts';
import { preparePrivateDir } from './dev-data-dir.ts';

export const ENVIRONMENTS_DIR_NAME = 'environments';
const STAMP_FILE = '.runlet-environment.json';
/** pip's --python (install into another interpreter's environment) appeared in pip 22.3. */
const PIP_WITH_PYTHON_OPTION = [22, 3];
/** pip's last words on stderr kept for the error message when no line says ERROR. */
const ERROR_TAIL_LINES = 20;

/** What an interpreter says of itself. */
export interface Interpreter {
  /** As given (`python3`, `--python PATH`). */
  command: string;
  /** sys.executable: the file that runs. */
  executable: string;
  /** `3.11.7` */
  version: string;
  /** pip's version importable by it, or null. */
  pip: string | null;
}

export interface Environment {
  /** The environment's folder. */
  dir: string;
  /** Its interpreter: what the runtime runs on. */
  python: string;
  /** False when it was built now. */
  reused: boolean;
}

const PROBE = `import json, sys
try:
    import pip
    pip_version = pip.__version__
except Exception:
    pip_version = None
print(json.dumps({"executable": sys.executable, "version": sys.version.split()[0], "pip": pip_version}))`;

/** Runs `command` to ask it what it is; throws naming the command when it cannot be run or is no Python. */
export async function probeInterpreter(command: string): Promise<Interpreter> {
  try {
    const { stdout } = await promisify(execFile)(command, ['-c', PROBE], { timeout: 30_000 });
    const said = JSON.parse(stdout) as Omit<Interpreter, 'command'>;
    return { command, executable: said.executable, version: said.version, pip: said.pip };
  } catch (err) {
    const reason = (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such program' : (err as Error).message.trim();
    throw new Error(`cannot use ${command} as the Python interpreter: ${reason}`, { cause: err });
  }
}

export class PythonEnvironments {
  readonly #root: string;
  readonly #logger: Logger;
  /** One build at a time per app: a second change waits for the first, then finds its stamp or builds anew. */
  readonly #queues = new Map<string, Promise<unknown>>();
  readonly #children = new Set<ChildProcess>();
  #closed = false;

  constructor(options: { dataDir: string; logger: Logger }) {
    this.#root = join(options.dataDir, ENVIRONMENTS_DIR_NAME);
    this.#logger = options.logger;
  }

  /** The app's environment for these requirements on this interpreter: the complete one there is, or a new one. */
  ensure(appName: string, requirements: Requirements, interpreter: Interpreter): Promise<Environment> {
    const previous = this.#queues.get(appName) ?? Promise.resolve();
    const next = previous.catch(() => undefined).then(() => this.#ensure(appName, requirements, interpreter));
    this.#queues.set(appName, next);
    return next;
  }

  /** Stops the installs under way (their folders stay unstamped, so unused); later calls of ensure fail. */
  async close(): Promise<void> {
    this.#closed = true;
    const children = [...this.#children];
    for (const child of children) child.kill('SIGTERM');
    await Promise.all(children.map((child) => (child.exitCode === null && child.signalCode === null ? once(child, 'exit') : undefined)));
  }

  async #ensure(appName: string, requirements: Requirements, interpreter: Interpreter): Promise<Environment> {
    const key = createHash('sha256')
      .update(JSON.stringify({ app: appName, executable: interpreter.executable, version: interpreter.version, requirements: requirements.keyText }))
      .digest('hex');
    const name = `${appName}-${key.slice(0, 16)}`;
    const dir = join(this.#root, name);
    const python = join(dir, 'bin', 'python');
    const log = this.#logger.child({ app: appName, environment: dir });
    if ((await readStamp(dir)) === key) {
      log.info(`dependencies unchanged: using the environment ${dir}`);
      return { dir, python, reused: true };
    }
    if (this.#closed) throw new Error('runlet dev is stopping');
    preparePrivateDir(this.#root, this.#logger);
    // Unstamped: an install that failed or was killed. Never used; built afresh.
    await rm(dir, { recursive: true, force: true });
    const startedAt = Date.now();
    log.info(`installing ${requirements.summary} (${requirements.source}) for Python ${interpreter.version} into ${dir}`);
    try {
      await this.#build(dir, requirements, interpreter, log);
    } catch (err) {
      await rm(dir, { recursive: true, force: true });
      throw err;
    }
    // Its contents keep pip's modes: the environments folder (0700) is what keeps them to the user.
    await chmod(dir, 0o700);
    await writeStamp(dir, key);
    log.info(`dependencies installed in ${((Date.now() - startedAt) / 1000).toFixed(1)} s`);
    await this.#removeOthers(appName, name, log);
    return { dir, python, reused: false };
  }

  async #build(dir: string, requirements: Requirements, interpreter: Interpreter, log: Logger): Promise<void> {
    const pipArgs = ['install', '--disable-pip-version-check', '--no-input', ...requirements.pipArgs];
    const failure = (what: string, detail: string): Error =>
      new Error(`cannot install ${requirements.summary} (${requirements.source}): ${what}:\n${detail}`);
    if (hasPipWithPythonOption(interpreter.pip)) {
      // No pip of its own: the interpreter's pip installs into it, which takes a second, not ensurepip's ten.
      const venv = await this.#run(interpreter.executable, ['-m', 'venv', '--without-pip', dir], log);
      if (venv.code !== 0) throw failure(`${interpreter.command} -m venv exited with status ${venv.code}`, venv.errors);
      const pip = await this.#run(interpreter.executable, ['-m', 'pip', '--python', join(dir, 'bin', 'python'), ...pipArgs], log);
      if (pip.code !== 0) throw failure(`pip exited with status ${pip.code}`, pip.errors);
      return;
    }
    const venv = await this.#run(interpreter.executable, ['-m', 'venv', dir], log);
    if (venv.code !== 0) {
      throw failure(
        `${interpreter.command} has no pip, and cannot make a virtual environment with one (on Debian and Ubuntu: apt-get install python3-venv)`,
        venv.errors,
      );
    }
    const pip = await this.#run(join(dir, 'bin', 'python'), ['-m', 'pip', ...pipArgs], log);
    if (pip.code !== 0) throw failure(`pip exited with status ${pip.code}`, pip.errors);
  }

  /** Runs a step, its output logged line by line as progress; resolves with its status and what it said went wrong. */
  async #run(command: string, args: string[], log: Logger): Promise<{ code: number | null; errors: string }> {
    if (this.#closed) throw new Error('runlet dev is stopping');
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, PYTHONUNBUFFERED: '1' } });
    this.#children.add(child);
    const stderr: string[] = [];
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (line.trim() !== '') log.info(`pip: ${line}`);
    });
    createInterface({ input: child.stderr! }).on('line', (line) => {
      if (line.trim() === '') return;
      log.warn(`pip: ${line}`);
      stderr.push(line);
      if (stderr.length > 1000) stderr.shift();
    });
    const [code, signal] = (await Promise.race([
      once(child, 'exit'),
      once(child, 'error').then(([err]) => {
        throw new Error(`cannot run ${command}: ${(err as Error).message}`, { cause: err });
      }),
    ])) as [number | null, string | null];
    this.#children.delete(child);
    if (this.#closed) throw new Error('runlet dev is stopping');
    const errorLines = stderr.filter((line) => line.startsWith('ERROR:'));
    const errors = (errorLines.length > 0 ? errorLines : stderr.slice(-ERROR_TAIL_LINES)).join('\n') || `(no output; ${signal ?? 'no signal'})`;
    return { code, errors };
  }

  async #removeOthers(appName: string, keep: string, log: Logger): Promise<void> {
    // An app name is a DNS label: no pattern characters.
    const ofApp = new RegExp(`^${appName}-[0-9a-f]{16}$`);
    for (const entry of await readdir(this.#root)) {
      if (entry === keep || !ofApp.test(entry)) continue;
      await rm(join(this.#root, entry), { recursive: true, force: true });
      log.info(`removed the app's previous environment ${join(this.#root, entry)}`);
    }
  }
}

function hasPipWithPythonOption(version: string | null): boolean {
  if (version === null) return false;
  const [major = 0, minor = 0] = version.split('.').map((part) => Number.parseInt(part, 10));
  const [needMajor, needMinor] = PIP_WITH_PYTHON_OPTION as [number, number];
  return major > needMajor || (major === needMajor && minor >= needMinor);
}

async function readStamp(dir: string): Promise<string | null> {
  try {
    return (JSON.parse(await readFile(join(dir, STAMP_FILE), 'utf8')) as { key?: unknown }).key as string;
  } catch {
    return null;
  }
}

/** Written whole or not at all: a rename over a file written beside it. */
async function writeStamp(dir: string, key: string): Promise<void> {
  const temporary = join(dir, `${STAMP_FILE}.partial`);
  await writeFile(temporary, JSON.stringify({ key, builtAt: new Date().toISOString() }) + '\n', { mode: 0o600 });
  await rename(temporary, join(dir, STAMP_FILE));
}
