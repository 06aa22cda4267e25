// Makes sure each app namespace has the sidecar's ServiceAccount, Role and RoleBinding. They are shared by
// every App of the namespace, so they are applied once per namespace (not once per reconcile) until
// forget() — on every resync and leadership change — has them applied again, repairing any drift.
import type { KubeApi } from '../kube/client.ts';
import { renderSidecarRbac } from './render/rbac.ts';

export class SidecarRbacApplier {
  readonly #api: KubeApi;
  readonly #ensured = new Map<string, Promise<void>>();

  constructor(api: KubeApi) {
    this.#api = api;
  }

  /** Applies the namespace's sidecar RBAC unless done already; concurrent callers share one apply. */
  ensure(namespace: string): Promise<void> {
    let applied = this.#ensured.get(namespace);
    if (applied === undefined) {
      applied = this.#applyInOrder(namespace);
      this.#ensured.set(namespace, applied);
      applied.catch(() => this.#ensured.delete(namespace));
    }
    return applied;
  }

  /**
   * One after the other, in render order: a real API server refuses a RoleBinding whose Role it cannot find
   * yet (RBAC's escalation check resolves the roleRef), so the Role must exist before its binding is sent.
   */
  async #applyInOrder(namespace: string): Promise<void> {
    for (const object of renderSidecarRbac(namespace)) await this.#api.apply(object);
  }

  forget(): void {
    this.#ensured.clear();
  }
}
