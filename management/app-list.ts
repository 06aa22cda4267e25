// The apps of a project as `GET /v2/projects/{project_id}/apps` lists them: `runlet dev` from the apps it
// serves (whether each takes calls, and why not), the operator from its App cache.

export interface AppSummary {
  name: string;
  /** Takes calls now (in a cluster: its Ready condition is True). */
  ready: boolean;
  /** Why it cannot take calls, when that is known (an import error; a cluster's Ready condition message). */
  error: string | null;
  /** Replicas running and ready now, and how many are wanted (the autoscaler's choice, or the fixed count). */
  replicas: { ready: number; desired: number };
  /** The app's `[scaling]`: the replica bounds and the calls each replica runs at once. */
  scaling: { minReplicas: number; maxReplicas: number; replicaConcurrency: number };
}

/** The apps of a project, by name; empty for a project that has none. */
export type AppList = (projectId: string) => AppSummary[];
