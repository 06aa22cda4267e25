// The banner's listing of a Python app's functions, read from source by a real interpreter, against the rule
// the runtime serves by (runtime/python/runlet_runtime/exports.py): own functions, or exactly `__all__`.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { readPythonFunctions, sampleArguments, signatureText } from './python-functions.js';
import { pythonInterpreter } from './runtime-supervisor.js';

const FIXTURES = resolve(import.meta.dirname, '../runtime/python/tests/fixtures');

describe('readPythonFunctions', () => {
  const folders: string[] = [];
  afterEach(async () => {
    await Promise.all(folders.splice(0).map((folder) => rm(folder, { recursive: true, force: true })));
  });

  async function appWith(source: string): Promise<string> {
    const folder = await mkdtemp(join(tmpdir(), 'runlet-python-functions-'));
    folders.push(folder);
    await writeFile(join(folder, 'main.py'), source);
    return folder;
  }

  it('lists the module’s own functions and lambdas, never what it imports', async () => {
    const functions = await readPythonFunctions(pythonInterpreter(), join(FIXTURES, 'imports'), 'main');
    // The runtime also serves `compact`, `prefixed` and `greeter` (built at import), which source cannot show;
    // everything listed here it serves, and nothing imported.
    expect(functions?.map((fn) => fn.name)).toEqual(['own', 'traced', 'decorated', 'cached', 'double']);
    expect(functions?.find((fn) => fn.name === 'double')?.parameters).toEqual([{ name: 'x', annotation: null, required: true }]);
  });

  it('lists exactly the names of __all__, in its order, less classes and private names', async () => {
    const functions = await readPythonFunctions(pythonInterpreter(), join(FIXTURES, 'exported'), 'main');
    expect(functions).toEqual([
      { name: 'run', parameters: [] },
      // Imported: served because __all__ names it, its parameters unknown to a reading of the source.
      { name: 'basename', parameters: null },
    ]);
    expect(signatureText(functions![1]!)).toBe('basename(…)');
    expect(sampleArguments(functions![1]!)).toBe('{}');
  });

  it('reads a tuple or a single string as __all__', async () => {
    const dir = await appWith('__all__ = "add"\ndef add(a, b=1): return a + b\ndef a(): pass\n');
    expect((await readPythonFunctions(pythonInterpreter(), dir, 'main'))?.map((fn) => fn.name)).toEqual(['add']);
    const tuple = await appWith('__all__ = ("b", "a")\ndef a(): pass\ndef b(): pass\n');
    expect((await readPythonFunctions(pythonInterpreter(), tuple, 'main'))?.map((fn) => fn.name)).toEqual(['b', 'a']);
  });

  it('gives no list when __all__ is computed, rather than a wrong one', async () => {
    const dir = await appWith('def a(): pass\n__all__ = [f.__name__ for f in (a,)]\n');
    expect(await readPythonFunctions(pythonInterpreter(), dir, 'main')).toBeNull();
  });
});
