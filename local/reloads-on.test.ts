// Which changes in an app's folder reload it: its Python sources, not what it writes nor the run store.
import { describe, expect, it } from 'vitest';
import { reloadsOn } from './runtime-supervisor.ts';

describe('reloadsOn', () => {
  it('reloads on Python sources anywhere in the folder', () => {
    expect(reloadsOn('main.py', [])).toBe(true);
    expect(reloadsOn('lib/helpers.py', [])).toBe(true);
  });

  it('ignores other files, byte code, hidden files and folders, and the ignored folders', () => {
    for (const name of ['out.txt', 'cache.json', '__pycache__/main.cpython-312.py', 'main.pyc', '.main.py.swp', '.venv/lib/x.py', 'data/x.py']) {
      expect(reloadsOn(name, ['data']), name).toBe(false);
    }
  });
});
