// The layout rules the import graph must keep: no cycles anywhere, and production code free of test code.
// Which folder may import which is folder-rules.ts's allow-list (kube/ generic, importing nothing of Runlet's,
// as knative.dev/pkg is to Knative).
import { describe, expect, it } from 'vitest';
import { FOLDER_RULES, isTest, NOT_PRODUCTION } from './folder-rules.ts';
import { importCycles, importGraph } from './imports.ts';

const graph = importGraph();
const PRODUCTION_FOLDERS = [...FOLDER_RULES.keys()].filter((folder) => !NOT_PRODUCTION.has(folder));

describe('the import graph', () => {
  it('has no cycles, type-only imports included', () => {
    expect(importCycles(graph)).toEqual([]);
  });

  it('finds a cycle when there is one', () => {
    const cyclic = new Map([
      ['a.ts', ['b.ts']],
      ['b.ts', ['c.ts']],
      ['c.ts', ['a.ts']],
      ['d.ts', ['a.ts']],
    ]);
    expect(importCycles(cyclic)).toEqual([['a.ts', 'b.ts', 'c.ts']]);
  });

  it('keeps test code out of production folders, and production code from importing it', () => {
    const production = [...graph.keys()].filter((file) => PRODUCTION_FOLDERS.some((folder) => file.startsWith(folder)) && !isTest(file));
    expect(production.length).toBeGreaterThan(0);
    const testImports = production.flatMap((file) => graph.get(file)!.filter((target) => isTest(target)).map((target) => `${file} → ${target}`));
    expect(testImports).toEqual([]);
  });
});
