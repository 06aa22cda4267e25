// The apps of a project as `GET /v2/projects/{project_id}/apps` lists them: `runlet dev` from the apps it
// serves (whether each takes calls, and why not), the operator from its App cache.

export interface AppSummary {
  name: string;
  /** Takes calls now (in a cluster: its Ready condition is True). */
  ready: boolean;
  /** Why it cannot take calls, when that is known (an import error; a cluster's Ready condition message). */
  error: string | null;
}

/** The apps of a project, by name; empty for a project that has none. */
export type AppList = (projectId: string) => AppSummary[];
