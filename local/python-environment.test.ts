// The environments' folder as runlet dev leaves it: an install that did not finish is never used, whether it
// failed, was cut short by a stop, or was killed before its stamp (a folder left without one).
import { mkdir, mkdtemp, readdir, rm, stat, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../test/support/wait.ts';
import { buildWheel, pipEnvironment, PYTHON, startPipIndex, type PipIndex } from '../test/support/pip-index.ts';
import type { Requirements } from './app-requirements.ts';
import { probeInterpreter, PythonEnvironments, type Interpreter } from './python-environment.ts';

const logger = pino({ level: 'silent' });
let work: string;
let index: PipIndex;
let interpreter: Interpreter;
const savedEnv = { ...process.env };

function requirements(...packages: string[]): Requirements {
  return { source: '[dependencies.pip]', pipArgs: ['--', ...packages], keyText: JSON.stringify(packages), summary: packages.join(', '), notes: [] };
}

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'runlet-environments-'));
  await mkdir(join(work, 'wheels'));
  index = await startPipIndex([await buildWheel(join(work, 'wheels'), { name: 'tinypkg', version: '1.0', files: { 'tinypkg/__init__.py': 'VALUE = 1\n' } })]);
  // pip is run by the code under test with this process's environment: the test index only.
  for (const [name, value] of Object.entries(pipEnvironment(index))) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
  interpreter = await probeInterpreter(PYTHON);
});

afterAll(async () => {
  process.env = savedEnv;
  await index?.close();
  await rm(work, { recursive: true, force: true });
});

describe('PythonEnvironments', () => {
  it('rebuilds a folder without its stamp instead of using it', { timeout: 120_000 }, async () => {
    const dataDir = join(work, 'unstamped');
    const environments = new PythonEnvironments({ dataDir, logger });
    const built = await environments.ensure('app', requirements('tinypkg==1.0'), interpreter);
    expect(built.reused).toBe(false);
    expect((await environments.ensure('app', requirements('tinypkg==1.0'), interpreter)).reused).toBe(true);

    // As a runlet dev killed after pip, before the stamp: a folder that looks whole, but is not known to be.
    await unlink(join(built.dir, '.runlet-environment.json'));
    await writeFile(join(built.dir, 'left-by-the-killed-install'), '');
    index.requests.length = 0;
    const rebuilt = await environments.ensure('app', requirements('tinypkg==1.0'), interpreter);
    expect(rebuilt).toMatchObject({ dir: built.dir, reused: false });
    expect(index.requests).toContain('/simple/tinypkg/');
    await expect(stat(join(built.dir, 'left-by-the-killed-install'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('leaves no folder of an install a stop cut short, and the next start builds it', { timeout: 120_000 }, async () => {
    const dataDir = join(work, 'stopped');
    const stopping = new PythonEnvironments({ dataDir, logger });
    const cut = stopping.ensure('app', requirements('tinypkg==1.0'), interpreter);
    cut.catch(() => undefined);
    // Stopped while the environment is being made.
    await waitFor(async () => (await readdir(join(dataDir, 'environments')).catch(() => [])).length > 0, { timeoutMs: 60_000, what: 'the build to start' });
    await stopping.close();
    await expect(cut).rejects.toThrow('runlet dev is stopping');
    expect(await readdir(join(dataDir, 'environments'))).toEqual([]);

    const next = await new PythonEnvironments({ dataDir, logger }).ensure('app', requirements('tinypkg==1.0'), interpreter);
    expect(next.reused).toBe(false);
  });

  it('keeps the environment before a failed install, and leaves nothing of the failed one', { timeout: 120_000 }, async () => {
    const dataDir = join(work, 'failed');
    const environments = new PythonEnvironments({ dataDir, logger });
    const good = await environments.ensure('app', requirements('tinypkg==1.0'), interpreter);
    await expect(environments.ensure('app', requirements('tinypkg==1.0', 'nosuchpkg'), interpreter)).rejects.toThrow(
      /cannot install tinypkg==1\.0, nosuchpkg \(\[dependencies\.pip\]\): pip exited with status 1:\nERROR: Could not find a version that satisfies the requirement nosuchpkg/,
    );
    expect(await readdir(join(dataDir, 'environments'))).toEqual([basename(good.dir)]);
    // Another app's environments are not the app's to remove.
    const other = await environments.ensure('app-b', requirements('tinypkg==1.0'), interpreter);
    const newer = await environments.ensure('app', requirements('tinypkg'), interpreter);
    expect((await readdir(join(dataDir, 'environments'))).sort()).toEqual([basename(other.dir), basename(newer.dir)].sort());
  });
});
