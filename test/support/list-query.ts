// A list of runs as the management API asks a run source for it: the first page of an App's runs, no filter,
// unless the test says otherwise.
import type { ListRunsQuery } from '../../management/run-source.ts';

export function listQuery(projectId: string, appName: string, overrides: Partial<ListRunsQuery> = {}): ListRunsQuery {
  return { projectId, appName, pageSize: 50, beforeId: null, asyncOnly: false, status: null, functionName: null, createdAfter: null, createdBefore: null, ...overrides };
}
