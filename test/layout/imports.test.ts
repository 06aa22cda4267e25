// The layout rules the import graph must keep: no cycles anywhere, kube/ generic (Kubernetes only, no Runlet
// imports, as knative.dev/pkg is to Knative), and production code free of test code.
import { describe, expect, it } from 'vitest';
import { importCycles, importGraph } from './imports.ts';

const graph = importGraph();
const isTest = (file: string): boolean => file.endsWith('.test.ts') || file.startsWith('test/');
const PRODUCTION_FOLDERS = ['cli/', 'sidecar/', 'crds/', 'kube/', 'operator/', 'management/', 'local/', 'results/', 'charts/'];

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

  it('keeps kube/ to itself', () => {
    const outside = [...graph].filter(([file]) => file.startsWith('kube/') && !isTest(file)).flatMap(([file, imports]) => imports.filter((target) => !target.startsWith('kube/')).map((target) => `${file} → ${target}`));
    expect(outside).toEqual([]);
  });

  it('keeps test code out of production folders, and production code from importing it', () => {
    const production = [...graph.keys()].filter((file) => PRODUCTION_FOLDERS.some((folder) => file.startsWith(folder)) && !isTest(file));
    expect(production.length).toBeGreaterThan(0);
    const testImports = production.flatMap((file) => graph.get(file)!.filter((target) => isTest(target)).map((target) => `${file} → ${target}`));
    expect(testImports).toEqual([]);
  });
});
