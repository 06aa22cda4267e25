// `runlet dev` installs an app's [dependencies.pip] (or its requirements.txt) into a virtual environment of the
// app's under the data dir, from whatever index pip is configured with: here a local index on loopback serving
// wheels the test builds, with the machine's own pip configuration switched off.
import { mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.ts';
import { spawnDev, type DevProcess } from '../support/dev-process.ts';
import { buildWheel, pipEnvironment, PYTHON, startPipIndex, type PipIndex } from '../support/pip-index.ts';
import { waitFor } from '../support/wait.ts';

const INSTALL_TIMEOUT_MS = 120_000;

const MAIN_PY = `import sys

import greetpkg


def answer() -> str:
    return greetpkg.answer()


def prefix() -> str:
    return sys.prefix
`;

let work: string;
let index: PipIndex;
const cleanup: Array<() => Promise<unknown>> = [];

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'runlet-dev-deps-'));
  const wheels = join(work, 'wheels');
  await mkdir(wheels);
  const paths = await Promise.all(
    ['1.0', '2.0'].map((version) =>
      buildWheel(wheels, { name: 'greetpkg', version, files: { 'greetpkg/__init__.py': `def answer():\n    return "greetpkg ${version}"\n` } }),
    ),
  );
  index = await startPipIndex(paths);
});

afterAll(async () => {
  await index?.close();
  await rm(work, { recursive: true, force: true });
});

afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

async function appDir(name: string, serviceToml: string, files: Record<string, string> = {}): Promise<string> {
  const dir = await mkdtemp(join(work, `${name}-`));
  await writeFile(join(dir, 'main.py'), MAIN_PY);
  await writeFile(join(dir, 'service.toml'), `[deployment]\nname = "${name}"\n\n${serviceToml}\n`);
  for (const [file, text] of Object.entries(files)) await writeFile(join(dir, file), text);
  return dir;
}

async function dev(app: string, dataDir: string, extraArgs: string[] = []): Promise<DevProcess> {
  const process_ = await spawnDev([app], dataDir, extraArgs, pipEnvironment(index));
  cleanup.push(async () => {
    if (process_.child.exitCode === null) process_.child.kill('SIGKILL');
    await process_.exited;
  });
  return process_;
}

async function stop(process_: DevProcess): Promise<void> {
  process_.child.kill('SIGTERM');
  expect(await process_.exited).toBe(0);
}

async function call(url: string, app: string, fn: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${url}/v4/dev/${app}/${fn}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

async function environments(dataDir: string): Promise<string[]> {
  return (await readdir(join(dataDir, 'environments'))).sort();
}

function occurrences(text: string, part: string): number {
  return text.split(part).length - 1;
}

describe('runlet dev: an app\'s dependencies', () => {
  it('installs them into an environment of its own at the first start, with progress, and reuses it at the next', { timeout: INSTALL_TIMEOUT_MS }, async () => {
    const app = await appDir('deps', '[dependencies.pip]\npackages = ["greetpkg==1.0"]');
    const dataDir = join(work, 'data-first');
    index.requests.length = 0;
    const first = await dev(app, dataDir);
    expect(first.output()).toContain('installing greetpkg==1.0 ([dependencies.pip])');
    expect(first.output()).toContain('pip: Successfully installed greetpkg-1.0');
    expect(first.output()).toMatch(/environment: .*environments\/deps-[0-9a-f]{16} \(installed now\)/);
    expect(first.output()).toMatch(/Python apps run on python3 \(Python 3\.\d+/);
    expect(index.requests).toContain('/simple/greetpkg/');
    expect(await call(first.url, 'deps', 'answer')).toMatchObject({ status: 200, body: { result: 'greetpkg 1.0' } });
    // The environment is under the data dir, private to the user, and holds the app's package only.
    const [environment] = await environments(dataDir);
    expect((await call(first.url, 'deps', 'prefix')).body.result).toBe(join(dataDir, 'environments', environment!));
    expect((await stat(join(dataDir, 'environments'))).mode & 0o777).toBe(0o700);
    expect((await stat(join(dataDir, 'environments', environment!))).mode & 0o777).toBe(0o700);
    expect((await stat(join(dataDir, 'environments', environment!, '.runlet-environment.json'))).mode & 0o777).toBe(0o600);
    await stop(first);

    index.requests.length = 0;
    const second = await dev(app, dataDir);
    expect(second.output()).toMatch(/environment: .*environments\/deps-[0-9a-f]{16} \(reused: its dependencies are unchanged\)/);
    expect(second.output()).not.toContain('installing');
    expect(await call(second.url, 'deps', 'answer')).toMatchObject({ status: 200, body: { result: 'greetpkg 1.0' } });
    // pip did not run: it would have asked the index.
    expect(index.requests).toEqual([]);
    expect(await environments(dataDir)).toEqual([environment]);
  });

  it('installs a changed dependency and reloads the app; one that cannot be installed stops the app with pip\'s error and keeps the environment before it', { timeout: INSTALL_TIMEOUT_MS * 2 }, async () => {
    const app = await appDir('change', '[dependencies.pip]\npackages = ["greetpkg==1.0"]');
    const dataDir = join(work, 'data-change');
    const running = await dev(app, dataDir);
    expect(await call(running.url, 'change', 'answer')).toMatchObject({ status: 200, body: { result: 'greetpkg 1.0' } });
    const [first] = await environments(dataDir);

    await writeFile(join(app, 'service.toml'), '[deployment]\nname = "change"\n\n[dependencies.pip]\npackages = ["greetpkg==2.0"]\n');
    await waitFor(() => running.output().includes('dependencies changed; reloading on their new environment'), { timeoutMs: INSTALL_TIMEOUT_MS, what: 'the reload on the new environment' });
    expect(running.output()).toContain('installing greetpkg==2.0');
    await waitFor(async () => (await call(running.url, 'change', 'answer')).body.result === 'greetpkg 2.0', { timeoutMs: 30_000, what: 'the app on greetpkg 2.0' });
    // The environment of 1.0 is gone once the one of 2.0 is complete.
    const [second] = await environments(dataDir);
    expect(second).not.toBe(first);
    expect(await environments(dataDir)).toEqual([second]);

    const before = running.output().length;
    await writeFile(join(app, 'service.toml'), '[deployment]\nname = "change"\n\n[dependencies.pip]\npackages = ["greetpkg==2.0", "nosuchpkg==1.0"]\n');
    await waitFor(() => running.output().slice(before).includes('cannot start the app'), { timeoutMs: INSTALL_TIMEOUT_MS, what: 'the failed install' });
    const failure = running.output().slice(before);
    // pip's own words, naming the package.
    expect(failure).toContain('ERROR: No matching distribution found for nosuchpkg==1.0');
    const refused = await waitFor(async () => {
      const answer = await call(running.url, 'change', 'answer');
      return answer.status === 503 ? answer : null;
    }, { what: 'the app to be stopped' });
    expect(refused.body.detail).toContain('cannot install greetpkg==2.0, nosuchpkg==1.0 ([dependencies.pip])');
    expect(refused.body.detail).toContain('No matching distribution found for nosuchpkg==1.0');
    // Nothing half-installed is left; the last good environment is.
    expect(await environments(dataDir)).toEqual([second]);

    // Back to what was installed: the environment is reused at once, no pip run.
    index.requests.length = 0;
    const beforeRevert = running.output().length;
    await writeFile(join(app, 'service.toml'), '[deployment]\nname = "change"\n\n[dependencies.pip]\npackages = ["greetpkg==2.0"]\n');
    await waitFor(async () => (await call(running.url, 'change', 'answer')).body.result === 'greetpkg 2.0', { timeoutMs: 30_000, what: 'the app back on greetpkg 2.0' });
    expect(running.output().slice(beforeRevert)).toContain('dependencies unchanged: using the environment');
    expect(index.requests).toEqual([]);
    await stop(running);
  });

  it('does not start an app whose dependencies cannot be installed, and says why in the banner', { timeout: INSTALL_TIMEOUT_MS }, async () => {
    const app = await appDir('missing', '[dependencies.pip]\npackages = ["nosuchpkg==1.0"]');
    const dataDir = join(work, 'data-missing');
    const running = await dev(app, dataDir);
    expect(running.output()).toContain('cannot start: cannot install nosuchpkg==1.0 ([dependencies.pip]): pip exited with status 1');
    expect(running.output()).toContain('ERROR: No matching distribution found for nosuchpkg==1.0');
    const answer = await call(running.url, 'missing', 'answer');
    expect(answer.status).toBe(503);
    expect(answer.body.detail).toContain('nosuchpkg==1.0');
    // The runtime was never started: it would have failed to import greetpkg.
    expect(running.output()).not.toContain('runtime ready');
    expect(await environments(dataDir)).toEqual([]);
  });

  it('starts an app without dependencies with no environment, and says once that [dependencies.apt] is not installed', async () => {
    const dir = await mkdtemp(join(work, 'plain-'));
    await writeFile(join(dir, 'main.py'), 'def hello() -> str:\n    return "hello"\n');
    await writeFile(join(dir, 'service.toml'), '[deployment]\nname = "plain"\n\n[dependencies.apt]\npackages = ["libgl1"]\n');
    const dataDir = join(work, 'data-plain');
    index.requests.length = 0;
    const running = await dev(dir, dataDir);
    expect(await call(running.url, 'plain', 'hello')).toMatchObject({ status: 200, body: { result: 'hello' } });
    expect(occurrences(running.output(), '[dependencies.apt] (libgl1) is not installed: Runlet installs [dependencies.pip] only')).toBe(1);
    // A change of service.toml prepares the app again, and says nothing more of apt.
    await writeFile(join(dir, 'service.toml'), '[deployment]\nname = "plain"\n\n[dependencies.apt]\npackages = ["libgl1", "ffmpeg"]\n');
    await writeFile(join(dir, 'main.py'), 'def hello() -> str:\n    return "hello again"\n');
    await waitFor(async () => (await call(running.url, 'plain', 'hello')).body.result === 'hello again', { what: 'the reload' });
    expect(occurrences(running.output(), 'is not installed: Runlet installs [dependencies.pip] only')).toBe(1);
    expect(running.output()).not.toContain('environment:');
    expect(running.output()).not.toContain('installing');
    await expect(stat(join(dataDir, 'environments'))).rejects.toMatchObject({ code: 'ENOENT' });
    expect(index.requests).toEqual([]);
  });

  it('makes the environment with the interpreter --python names, from a requirements.txt', { timeout: INSTALL_TIMEOUT_MS }, async () => {
    // Another path to the interpreter: the one the test runs on, by a name of the test's own.
    const { stdout } = await promisify(execFile)(PYTHON, ['-c', 'import sys; print(sys.executable)']);
    const bin = join(work, 'bin');
    await mkdir(bin, { recursive: true });
    const chosen = join(bin, 'chosen-python');
    await symlink(stdout.trim(), chosen);
    const app = await appDir('reqs', '', { 'requirements.txt': '# pinned\ngreetpkg==2.0\n' });
    const dataDir = join(work, 'data-reqs');
    const running = await dev(app, dataDir, ['--python', chosen]);
    expect(running.output()).toContain(`Python apps run on ${chosen} (Python 3.`);
    expect(running.output()).toContain(`installing greetpkg==2.0 (${join(app, 'requirements.txt')})`);
    expect(await call(running.url, 'reqs', 'answer')).toMatchObject({ status: 200, body: { result: 'greetpkg 2.0' } });
    // The app's environment was made by that interpreter: its pyvenv.cfg names the folder it is in.
    const prefix = (await call(running.url, 'reqs', 'prefix')).body.result as string;
    expect(await readFile(join(prefix, 'pyvenv.cfg'), 'utf8')).toContain(`home = ${bin}`);

    const refused = await runCli(['dev', app, '--port', '0', '--data-dir', dataDir, '--python', join(bin, 'no-such-python')]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(`--python: cannot use ${join(bin, 'no-such-python')} as the Python interpreter: no such program`);
  });

  it('gives the environment a pip of its own when the interpreter has none', { timeout: INSTALL_TIMEOUT_MS * 2 }, async () => {
    // The test's interpreter without its site-packages (-S): no pip to install with, as a Debian python3 without python3-pip.
    const { stdout } = await promisify(execFile)(PYTHON, ['-c', 'import sys; print(sys.executable)']);
    const bin = await mkdtemp(join(work, 'bin-'));
    const withoutPip = join(bin, 'python-without-pip');
    await writeFile(withoutPip, `#!/bin/sh\nexec ${stdout.trim()} -S "$@"\n`, { mode: 0o755 });
    await expect(promisify(execFile)(withoutPip, ['-c', 'import pip'])).rejects.toThrow(/No module named 'pip'/);
    const app = await appDir('nopip', '[dependencies.pip]\npackages = ["greetpkg==1.0"]');
    const running = await dev(app, join(work, 'data-nopip'), ['--python', withoutPip]);
    expect(running.output()).toContain('pip: Successfully installed greetpkg-1.0');
    expect(await call(running.url, 'nopip', 'answer')).toMatchObject({ status: 200, body: { result: 'greetpkg 1.0' } });
    const prefix = (await call(running.url, 'nopip', 'prefix')).body.result as string;
    await stat(join(prefix, 'bin', 'pip'));
  });
});
