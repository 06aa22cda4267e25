// Which apps exist, as the management API needs to know: to answer 404 for an unknown app rather than an empty
// list, and to resolve the `{project_id}-{app_name}` form of `app_id`. `runlet dev` knows its apps from the
// command line; the operator from its App informer cache — both answer without I/O, hence a synchronous check.

export interface AppDirectory {
  hasApp(projectId: string, appName: string): boolean;
}

/**
 * The app an `app_id` path segment names: the app of that exact name, else, for `{project_id}-{app_name}`, the
 * app named by the rest. The exact name wins, so an app literally named `{project_id}-x` stays reachable.
 * Undefined when neither exists.
 */
export function resolveAppName(apps: AppDirectory, projectId: string, appId: string): string | undefined {
  if (apps.hasApp(projectId, appId)) return appId;
  const prefix = `${projectId}-`;
  if (appId.length > prefix.length && appId.startsWith(prefix)) {
    const appName = appId.slice(prefix.length);
    if (apps.hasApp(projectId, appName)) return appName;
  }
  return undefined;
}

/** A fixed set of apps: `runlet dev` (the apps it serves) and tests. */
export class InMemoryAppDirectory implements AppDirectory {
  readonly #appsByProject = new Map<string, Set<string>>();

  constructor(apps: Iterable<{ projectId: string; appName: string }> = []) {
    for (const { projectId, appName } of apps) this.add(projectId, appName);
  }

  add(projectId: string, appName: string): void {
    let names = this.#appsByProject.get(projectId);
    if (names === undefined) {
      names = new Set();
      this.#appsByProject.set(projectId, names);
    }
    names.add(appName);
  }

  hasApp(projectId: string, appName: string): boolean {
    return this.#appsByProject.get(projectId)?.has(appName) ?? false;
  }
}
