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
      applied = Promise.all(renderSidecarRbac(namespace).map((object) => this.#api.apply(object))).then(() => undefined);
      this.#ensured.set(namespace, applied);
      applied.catch(() => this.#ensured.delete(namespace));
    }
    return applied;
  }

  forget(): void {
    this.#ensured.clear();
  }
}
