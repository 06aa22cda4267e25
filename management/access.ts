// What each management operation asks the cluster's authorizer for, in the project's namespace, API group
// runlet.dev: `list runs` to read apps and runs, `cancel runs` to cancel one (a verb of its own, so that reading
// runs does not let a caller stop them), and verbs on `apikeys` for the API keys page. Neither resource is
// stored; RBAC grants them all the same (the chart's runs viewer, runs operator and API keys admin ClusterRoles).

export interface ManagementAccess {
  verb: 'list' | 'cancel' | 'create' | 'delete';
  resource: 'runs' | 'apikeys';
}

export const LIST_RUNS: ManagementAccess = { verb: 'list', resource: 'runs' };
export const CANCEL_RUNS: ManagementAccess = { verb: 'cancel', resource: 'runs' };
export const LIST_KEYS: ManagementAccess = { verb: 'list', resource: 'apikeys' };
export const CREATE_KEYS: ManagementAccess = { verb: 'create', resource: 'apikeys' };
export const DELETE_KEYS: ManagementAccess = { verb: 'delete', resource: 'apikeys' };
