// The folder allow-list: the repository keeps it, the checker catches a forbidden edge, and
// docs/architecture.md's folder table says exactly what it says.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { EVERYTHING, FOLDER_RULES, forbiddenImports } from './folder-rules.ts';
import { importGraph, REPO } from './imports.ts';

/**
 * The `folder → imports` of the table under "## The folders": the imports column's backticked folders and
 * files; "everything" or "anything" for a folder that may import anything; prose alone for nothing.
 */
function documentedRules(markdown: string): Map<string, string[]> {
  const section = markdown.split('\n## The folders\n')[1]?.split('\n## ')[0];
  if (section === undefined) throw new Error('docs/architecture.md has no "## The folders" section');
  const rules = new Map<string, string[]>();
  for (const line of section.split('\n')) {
    const cells = line.split('|').slice(1, -1).map((cell) => cell.trim());
    const folder = /^`([^`]+\/)`$/.exec(cells[0] ?? '')?.[1];
    if (folder === undefined) continue;
    const imports = cells[2] ?? '';
    rules.set(folder, /\b(everything|anything)\b/.test(imports) ? [EVERYTHING] : [...imports.matchAll(/`([^`]+(?:\/|\.ts))`/g)].map((match) => match[1]!));
  }
  return rules;
}

const sorted = (rules: ReadonlyMap<string, readonly string[]>): Record<string, string[]> =>
  Object.fromEntries([...rules].map(([folder, imports]): [string, string[]] => [folder, [...imports].sort()]));

describe('the folder allow-list', () => {
  it('is kept by every production file of the repository', () => {
    expect(forbiddenImports(importGraph())).toEqual([]);
  });

  it('names the file, the import and the rule of a forbidden edge, and a folder with no rule', () => {
    const rules = new Map([
      ['kube/', []],
      ['crds/', []],
      ['operator/', ['crds/', 'kube/', 'sidecar/drain-token.ts']],
      ['sidecar/', ['crds/']],
    ]);
    const graph = new Map([
      ['operator/holder.ts', ['kube/client.ts', 'sidecar/drain-token.ts', 'operator/render/names.ts', 'crds/problem.ts']],
      ['operator/reconcile.ts', ['sidecar/run-server.ts']],
      ['kube/client.ts', ['crds/api-group.ts']],
      ['operator/reconcile.test.ts', ['sidecar/run-server.ts', 'test/support/wait.ts']],
      ['activator/main.ts', []],
      ['vitest.config.ts', ['cli/runlet.ts']],
    ]);
    expect(forbiddenImports(graph, rules)).toEqual([
      'operator/reconcile.ts imports sidecar/run-server.ts, but operator/ may import only its own files and crds/, kube/, sidecar/drain-token.ts (test/layout/folder-rules.ts)',
      "kube/client.ts imports crds/api-group.ts, but kube/ may import only its own files and nothing of Runlet's (test/layout/folder-rules.ts)",
      "activator/main.ts is in a folder with no import rule: give it one in test/layout/folder-rules.ts and a row in docs/architecture.md's folder table",
    ]);
  });

  it('is the folder table of docs/architecture.md, row for row', () => {
    const documented = documentedRules(readFileSync(join(REPO, 'docs/architecture.md'), 'utf8'));
    expect(sorted(documented)).toEqual(sorted(FOLDER_RULES));
  });

  it('reads a table row as the rule it states', () => {
    const table = [
      '## The folders',
      '| folder | owns | imports |',
      '|---|---|---|',
      "| `kube/` | the client | nothing of Runlet's |",
      '| `sidecar/` | the run port (`run-server.ts`) | `run-request/`, `crds/`, `management/run-source.ts` (its SQLite store) |',
      '| `cli/` | the command | everything |',
      '| `runtime/python/` | the runtime | its generated `problem_types.py` only |',
      '## Next',
      '| `after/` | not the table | `crds/` |',
    ].join('\n');
    expect(sorted(documentedRules(`# Title\n${table}\n`))).toEqual({
      'cli/': [EVERYTHING],
      'kube/': [],
      'runtime/python/': [],
      'sidecar/': ['crds/', 'management/run-source.ts', 'run-request/'],
    });
  });
});
