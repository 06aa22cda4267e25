// Which top-level folder may import which: the allow-list the import graph is held to, and that
// docs/architecture.md's folder table states (folder-rules.test.ts compares the two). A folder's production
// files may import their own folder's files and what its rule names: folders (ending in `/`) or single files,
// each single file an exception with its reason below. Test files (`*.test.ts`, and everything in test/) may
// import anything; that production code imports no test code is checked on its own (imports.test.ts).

/** In a rule: the folder may import anything. */
export const EVERYTHING = '*';

export const FOLDER_RULES: ReadonlyMap<string, readonly string[]> = new Map([
  ['crds/', []],
  ['kube/', []],
  ['run-request/', ['crds/', 'kube/']],
  ['management/', ['crds/', 'kube/']],
  ['results/', ['crds/', 'management/']],
  // A client of the management API over HTTP like any other: it holds no session and reads no store.
  ['dashboard/', []],
  // runlet dev's SQLite run store is also the runs API's run source there, so it implements that interface.
  // The run stores' contract of history (results/run-history.ts: list, get, counters, retention), which the
  // SQLite store implements as the PostgreSQL one does; and the bounds of a batch the collector takes (results/batch-limits.ts).
  ['sidecar/', ['run-request/', 'crds/', 'kube/', 'management/run-source.ts', 'results/run-history.ts', 'results/batch-limits.ts']],
  // The admin port's cancel (sidecar/admin-cancel.ts: its path, signature and answer), which the operator's
  // management API asks of the replica that runs the call, signed with the namespace's admin key.
  // The operator can still host the holder itself (`runlet operator --holder on`, as the chart runs it) and
  // count its calls, until the chart runs `runlet activator` instead (the test clusters do); a cancel through
  // It renders the sidecar's results collector URL under the env name the shipper reads
  // (sidecar/runs/results-shipper-store.ts). Its management API drops a call held at zero (activator/hold-cancel.ts, over its records: hold-records.ts); its config carries the holder's
  // bounds (activator/hold-bounds.ts). A held call it cancels gets its webhook from the sidecar's deliverer
  // (sidecar/webhook/deliver.ts), one retry table for every webhook; it lists and cancels the calls the holders
  // hold through their control routes (activator/hold-control.ts).
  ['operator/', ['run-request/', 'crds/', 'kube/', 'management/', 'dashboard/', 'results/', 'sidecar/admin-cancel.ts', 'activator/holder.ts', 'activator/metrics.ts', 'activator/hold-cancel.ts', 'activator/hold-control.ts', 'activator/hold-records.ts', 'activator/hold-bounds.ts', 'sidecar/runs/results-shipper-store.ts', 'sidecar/webhook/deliver.ts']],
  // The operator owns what the activator reads of it: the names it gives an App's objects (its Deployment, the
  // sidecar's run port), the holder key (made and copied to each namespace's sidecars by the operator), and
  // which pod is ready (the test the App's Endpoints use, so a call is handed to no pod they would not list),
  // an App's scaling settings and the replicas waiting calls need (autoscaling/settings.ts), and the demand the
  // autoscaler reads from the holder (autoscaling/held-demand.ts). The webhook of a held call cancelled before
  // it ran is the sidecar's webhook (sidecar/webhook/: endpoint, payload, signature), not a copy. Its admin port
  // is the operator's health server (operator/health-server.ts: liveness, readiness, metrics), not a copy.
  ['activator/', ['run-request/', 'crds/', 'kube/', 'sidecar/webhook/', 'operator/render/names.ts', 'operator/autoscaling/holder-key.ts', 'operator/autoscaling/settings.ts', 'operator/autoscaling/held-demand.ts', 'operator/health-server.ts']],
  // runlet dev applies retention to its SQLite store through the stores' contract of history.
  ['local/', ['sidecar/', 'run-request/', 'management/', 'dashboard/', 'crds/', 'results/run-history.ts']],
  ['cli/', [EVERYTHING]],
  ['charts/', []],
  ['docs/', ['crds/', 'run-request/', 'sidecar/', 'management/']],
  ['runtime/python/', []],
  ['test/', [EVERYTHING]],
  ['bench/', [EVERYTHING]],
]);

/** The folders whose code is not production code: test kits and benchmarks, which may import test code. */
export const NOT_PRODUCTION = new Set(['test/', 'bench/']);

/** A test file: `*.test.ts` anywhere, and everything in test/. */
export const isTest = (file: string): boolean => file.endsWith('.test.ts') || file.startsWith('test/');

/** The rule's folder a file is in: the longest one its path starts with; null for none. */
export function folderOf(file: string, rules: ReadonlyMap<string, readonly string[]>): string | null {
  let found: string | null = null;
  for (const folder of rules.keys()) if (file.startsWith(folder) && (found === null || folder.length > found.length)) found = folder;
  return found;
}

function allows(allowed: readonly string[], target: string): boolean {
  return allowed.some((entry) => entry === EVERYTHING || (entry.endsWith('/') ? target.startsWith(entry) : target === entry));
}

/**
 * Every import the rules forbid, and every file in a folder that has no rule, as messages naming the file,
 * the import and the rule. Files at the repository's root (its tool configs) are in no folder and need none.
 */
export function forbiddenImports(graph: ReadonlyMap<string, readonly string[]>, rules: ReadonlyMap<string, readonly string[]> = FOLDER_RULES): string[] {
  const problems: string[] = [];
  for (const [file, imports] of graph) {
    if (!file.includes('/')) continue;
    const folder = folderOf(file, rules);
    if (folder === null) {
      problems.push(`${file} is in a folder with no import rule: give it one in test/layout/folder-rules.ts and a row in docs/architecture.md's folder table`);
      continue;
    }
    if (isTest(file)) continue;
    const allowed = rules.get(folder)!;
    for (const target of imports) {
      if (target.startsWith(folder) || allows(allowed, target)) continue;
      const rule = allowed.length === 0 ? 'nothing of Runlet\'s' : allowed.join(', ');
      problems.push(`${file} imports ${target}, but ${folder} may import only its own files and ${rule} (test/layout/folder-rules.ts)`);
    }
  }
  return problems;
}
