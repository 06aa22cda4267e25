// The in-memory Kubernetes API server for tests: see README.md for what it serves and simplifies.

export {
  KubeApiServer,
  startKubeApiServer,
  type KubeApiServerOptions,
  type PauseMode,
  type RequestFilter,
  type RequestRecord,
  type ServerCounters,
} from './server.ts';
export type { AccessRule, TokenIdentity } from './auth-reviews.ts';
export type { FailureRule, HangRule } from './faults.ts';
export type { ClientOptions } from './kubeconfig.ts';
export { kubeconfigYaml } from './kubeconfig.ts';
