// Each App namespace's admin key (sidecar/admin-cancel.ts): what the operator signs its cancels to that
// namespace's sidecars with. Random per namespace, derived from nothing, kept in the namespace's Secret
// `runlet-admin-key` (owned by every App of the namespace, so it goes with the last one), which the sidecars
// mount as files. Rotated every ROTATE_AFTER_MS: the new key becomes `current`, the old one `previous`, and the
// sidecars take both; the operator signs with the previous one until the kubelet has had time to refresh the
// mounted files (KUBELET_REFRESH_MS), then with the new one.
import type { V1Secret } from '@kubernetes/client-node';
import type { App } from '../crds/app-schema.ts';
import type { KubeApi } from '../kube/client.ts';
import type { KubeObject } from '../kube/objects.ts';
import { KubePath } from '../kube/paths.ts';
import { ADMIN_KEY_CURRENT, ADMIN_KEY_PREVIOUS, ADMIN_KEY_SECRET, newAdminKey } from '../sidecar/admin-cancel.ts';
import { MANAGED_BY, MANAGED_BY_LABEL } from './render/labels.ts';
import { SIDECAR_COMPONENT_LABEL, sharedOwnerReferences } from './render/rbac.ts';

export const ADMIN_KEY_COMPONENT = 'admin-key';
/** When the key was last made (epoch ms), on the Secret. */
export const ROTATED_AT_ANNOTATION = 'runlet.dev/rotated-at';
/** How long a key signs cancels before a new one replaces it. */
export const ROTATE_AFTER_MS = 24 * 3600_000;
/**
 * How long after a rotation the operator still signs with the previous key: the kubelet refreshes a mounted
 * Secret at its next sync of the pod (a minute by default) plus its cache's TTL.
 */
export const KUBELET_REFRESH_MS = 5 * 60_000;
/** How long a read Secret is reused for signing: a cancel finds the key in hand, and a rotation within this. */
const READ_REUSE_MS = 30_000;

export interface AdminKeySet {
  current: string;
  previous: string | undefined;
  rotatedAt: number;
}

function secretPath(namespace: string): KubePath {
  return KubePath.of({ version: 'v1', namespace, resource: 'secrets', name: ADMIN_KEY_SECRET });
}

function keySetOf(secret: V1Secret | undefined): AdminKeySet | undefined {
  const entry = (name: string): string | undefined => {
    const encoded = secret?.data?.[name];
    return encoded === undefined ? undefined : Buffer.from(encoded, 'base64').toString('utf8').trim();
  };
  const current = entry(ADMIN_KEY_CURRENT);
  if (current === undefined || current === '') return undefined;
  const rotatedAt = Number(secret?.metadata?.annotations?.[ROTATED_AT_ANNOTATION]);
  return { current, previous: entry(ADMIN_KEY_PREVIOUS) || undefined, rotatedAt: Number.isFinite(rotatedAt) ? rotatedAt : 0 };
}

export function renderAdminKeySecret(namespace: string, owners: readonly App[], keys: AdminKeySet): V1Secret & KubeObject {
  const base64 = (text: string): string => Buffer.from(text).toString('base64');
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'Opaque',
    metadata: {
      name: ADMIN_KEY_SECRET,
      namespace,
      labels: { [MANAGED_BY_LABEL]: MANAGED_BY, [SIDECAR_COMPONENT_LABEL]: ADMIN_KEY_COMPONENT },
      annotations: { [ROTATED_AT_ANNOTATION]: String(keys.rotatedAt) },
      ownerReferences: sharedOwnerReferences(owners),
    },
    data: { [ADMIN_KEY_CURRENT]: base64(keys.current), ...(keys.previous === undefined ? {} : { [ADMIN_KEY_PREVIOUS]: base64(keys.previous) }) },
  };
}

/** The key to sign with: the previous one while the sidecars may not have the new one yet. */
export function signingKeyOf(keys: AdminKeySet, now: number): string {
  return keys.previous !== undefined && now - keys.rotatedAt < KUBELET_REFRESH_MS ? keys.previous : keys.current;
}

export class AdminKeys {
  readonly #api: KubeApi;
  readonly #now: () => number;
  /** Per namespace: when its key was last made, as this operator applied or read it. */
  readonly #rotatedAt = new Map<string, number>();
  readonly #read = new Map<string, { at: number; keys: Promise<AdminKeySet | undefined> }>();

  constructor(options: { api: KubeApi; now?: () => number }) {
    this.#api = options.api;
    this.#now = options.now ?? Date.now;
  }

  /**
   * Makes the namespace's Secret when it is missing, rotates its key when due, and applies its owners (`force`:
   * they changed). Nothing is asked of the API server while the key this operator applied is not due.
   */
  async ensure(namespace: string, owners: readonly App[], force: boolean): Promise<void> {
    const known = this.#rotatedAt.get(namespace);
    if (!force && known !== undefined && this.#now() - known < ROTATE_AFTER_MS) return;
    const live = keySetOf(await this.#api.find<V1Secret & KubeObject>(secretPath(namespace)));
    const now = this.#now();
    const keys: AdminKeySet =
      live === undefined
        ? { current: newAdminKey(), previous: undefined, rotatedAt: now }
        : now - live.rotatedAt >= ROTATE_AFTER_MS
          ? { current: newAdminKey(), previous: live.current, rotatedAt: now }
          : live;
    await this.#api.apply(renderAdminKeySecret(namespace, owners, keys));
    this.#rotatedAt.set(namespace, keys.rotatedAt);
    this.#read.delete(namespace);
  }

  /** The key to sign a cancel to `namespace`'s sidecars with; undefined when the namespace has none yet. */
  async signingKey(namespace: string): Promise<string | undefined> {
    const now = this.#now();
    let read = this.#read.get(namespace);
    if (read === undefined || now - read.at >= READ_REUSE_MS) {
      read = { at: now, keys: this.#api.find<V1Secret & KubeObject>(secretPath(namespace)).then(keySetOf) };
      this.#read.set(namespace, read);
      read.keys.catch(() => this.#read.delete(namespace));
    }
    const keys = await read.keys;
    return keys === undefined ? undefined : signingKeyOf(keys, now);
  }
}
