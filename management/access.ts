// What each management operation asks the cluster's authorizer for, in the project's namespace, API group
// runlet.dev: `list runs` to read apps and runs, and verbs on `apikeys` for the API keys page. Neither
// resource is stored; RBAC grants them all the same (the chart's runs viewer and API keys admin ClusterRoles).

export interface ManagementAccess {
  verb: 'list' | 'create' | 'delete';
  resource: 'runs' | 'apikeys';
}

export const LIST_RUNS: ManagementAccess = { verb: 'list', resource: 'runs' };
export const LIST_KEYS: ManagementAccess = { verb: 'list', resource: 'apikeys' };
export const CREATE_KEYS: ManagementAccess = { verb: 'create', resource: 'apikeys' };
export const DELETE_KEYS: ManagementAccess = { verb: 'delete', resource: 'apikeys' };
