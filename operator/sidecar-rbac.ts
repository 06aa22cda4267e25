// Makes sure each app namespace has the sidecar's ServiceAccount and its RoleBinding to the ClusterRole
// `runlet-sidecar` — and its admin key (admin-keys.ts) and, with a holder, its own hand-over key, which its
// sidecars read (render/holder-key.ts) — owned by every App of the namespace (render/rbac.ts says why). They are applied again
// only when the namespace's Apps changed since the last apply, when a watch saw them drift or go
// (needsRepair), or after forget() — on every resync and leadership change.
//
// Races with the garbage collector heal through the watch: when the GC deletes them for an App that was
// deleted just as another was created, the deletion event finds an App left and has them applied again;
// when they are applied for an App that is gone by then, the GC finds no live owner and deletes them.
import type { V1RoleBinding } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { App } from '../crds/app-schema.ts';
import type { KubeApi } from '../kube/client.ts';
import { isInvalid, isNotFound } from '../kube/errors.ts';
import { refOf, resourcePath, type KubeObject } from '../kube/objects.ts';
import type { AdminKeys } from './admin-keys.ts';
import { namespaceHolderKey } from './autoscaling/holder-key.ts';
import { renderHolderKeyCopy } from './render/holder-key.ts';
import { LEGACY_SIDECAR_ROLE } from './render/names.ts';
import { renderSidecarRbac, sidecarRbacDrifted } from './render/rbac.ts';

export interface SidecarRbacApplierOptions {
  api: KubeApi;
  /** The live Apps of a namespace (the App watch's cache, without those being deleted). */
  appsIn(namespace: string): App[];
  logger: Logger;
  /** The namespaces' admin keys (admin-keys.ts), which sign cancels: made, owned and rotated with the rest. */
  adminKeys?: Pick<AdminKeys, 'ensure'>;
  /** With a holder (or the results store): each app namespace's own random hand-over key (autoscaling/holder-key.ts). */
  holderKeys?: boolean;
}

export class SidecarRbacApplier {
  readonly #options: SidecarRbacApplierOptions;
  /** Per namespace: the owners (sorted uids) last applied. */
  readonly #applied = new Map<string, string>();
  /** Per namespace: the last apply in hand. One at a time, so that an older owner list never lands last. */
  readonly #inHand = new Map<string, Promise<void>>();

  constructor(options: SidecarRbacApplierOptions) {
    this.#options = options;
  }

  /** Applies the namespace's sidecar RBAC unless it is current for the namespace's Apps. */
  ensure(namespace: string): Promise<void> {
    const next = (this.#inHand.get(namespace) ?? Promise.resolve()).catch(() => undefined).then(() => this.#ensureNow(namespace));
    this.#inHand.set(namespace, next);
    const done = () => {
      if (this.#inHand.get(namespace) === next) this.#inHand.delete(namespace);
    };
    next.then(done, done);
    return next;
  }

  /**
   * A watch saw the namespace's ServiceAccount or RoleBinding change, or go (`gone`): whether it must be applied
   * again (then the next ensure() does). Not when no App is left: then the garbage collector removed it, as meant.
   */
  needsRepair(kind: 'ServiceAccount' | 'RoleBinding', object: KubeObject, gone: boolean): boolean {
    const namespace = object.metadata?.namespace;
    if (namespace === undefined) return false;
    const owners = this.#options.appsIn(namespace);
    if (owners.length === 0) return false;
    const wanted = renderSidecarRbac(namespace, owners).find((candidate) => candidate.kind === kind && candidate.metadata?.name === object.metadata?.name);
    if (wanted === undefined || (!gone && !sidecarRbacDrifted(object, wanted))) return false;
    this.#applied.delete(namespace);
    return true;
  }

  forget(): void {
    this.#applied.clear();
  }

  async #ensureNow(namespace: string): Promise<void> {
    const owners = this.#options.appsIn(namespace);
    // Nothing would own them: the garbage collector would delete them at once.
    if (owners.length === 0) return;
    const ownerKey = owners
      .map((app) => app.metadata.uid ?? '')
      .sort()
      .join(',');
    const ownersChanged = this.#applied.get(namespace) !== ownerKey;
    // Also when the owners are the same: a key due for rotation is rotated.
    await this.#options.adminKeys?.ensure(namespace, owners, ownersChanged);
    if (!ownersChanged) return;
    const [account, binding] = renderSidecarRbac(namespace, owners);
    await Promise.all([this.#options.api.apply(account), this.#applyBinding(binding), this.#applyHolderKey(namespace, owners)]);
    this.#applied.set(namespace, ownerKey);
  }

  async #applyHolderKey(namespace: string, owners: readonly App[]): Promise<void> {
    if (this.#options.holderKeys !== true) return;
    // The key the namespace has (kept: an earlier version's derived key too), else a new random one.
    await this.#options.api.apply(renderHolderKeyCopy(namespace, owners, await namespaceHolderKey(this.#options.api, namespace)));
  }

  /**
   * A binding's roleRef cannot change (422): one left by an earlier version, bound to the per-namespace Role
   * `runlet-sidecar`, is deleted and created anew, and that Role deleted after it.
   */
  async #applyBinding(binding: V1RoleBinding): Promise<void> {
    const { api, logger } = this.#options;
    try {
      await api.apply(binding);
      return;
    } catch (error) {
      if (!isInvalid(error)) throw error;
      const path = resourcePath(refOf(binding as KubeObject));
      const existing = await api.find<V1RoleBinding & KubeObject>(path);
      const sameRole = existing?.roleRef.kind === binding.roleRef.kind && existing.roleRef.name === binding.roleRef.name;
      if (existing === undefined || sameRole) throw error;
      await api.delete(path, { uid: existing.metadata?.uid });
      await api.apply(binding);
    }
    const namespace = binding.metadata!.namespace!;
    const legacyRole = resourcePath({ apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', namespace, name: LEGACY_SIDECAR_ROLE });
    await api.delete(legacyRole).catch((error: unknown) => {
      if (!isNotFound(error)) throw error;
    });
    logger.info({ namespace }, 'the sidecar RoleBinding now binds the ClusterRole runlet-sidecar; the per-namespace Role of an earlier version is deleted');
  }
}
