import { describe, expect, it } from 'vitest';
import { codeHash } from './code-hash.ts';

describe('codeHash', () => {
  const base = codeHash({ data: { 'main.py': 'def run(): pass\n', 'util.py': 'x = 1\n' } });

  it.each([
    ['the same files in another order: the same hash', { data: { 'util.py': 'x = 1\n', 'main.py': 'def run(): pass\n' } }, true],
    ['a changed file: another hash', { data: { 'main.py': 'def run(): return 1\n', 'util.py': 'x = 1\n' } }, false],
    ['a renamed file: another hash', { data: { 'app.py': 'def run(): pass\n', 'util.py': 'x = 1\n' } }, false],
    ['a binary file added: another hash', { data: { 'main.py': 'def run(): pass\n', 'util.py': 'x = 1\n' }, binaryData: { 'w.bin': 'AAE=' } }, false],
  ])('%s', (_case, configMap, same) => {
    expect(codeHash(configMap) === base).toBe(same);
  });

  it('is short hex, fit for an annotation', () => {
    expect(base).toMatch(/^[0-9a-f]{16}$/);
    expect(codeHash({})).toMatch(/^[0-9a-f]{16}$/);
  });
});
