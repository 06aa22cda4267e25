// The holder's keys (run-request/auth/held-run.ts), none derived from another:
// - each App namespace's hand-over key: random, made by the operator in that namespace's Secret
//   `runlet-holder-key` (render/holder-key.ts), read there by the sidecars (their own namespace) and by the
//   holder (a `get` of that name). A tenant who reads it signs hand-overs only their own namespace's sidecars
//   trust, and learns nothing of any other namespace's key.
// - the control key, with which the operator signs its requests to the holders (hold-control.ts): a Secret in
//   the operator's namespace, made here at start with a random key when it is missing — so no key is ever
//   published in install.yaml or the chart's defaults — or read when it exists (one written by a concurrent
//   replica, which makes our create a 409, or one the cluster's admin provided). No tenant reads it.
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { V1Secret } from '@kubernetes/client-node';
import { APP_PLURAL, RUNLET_GROUP, RUNLET_VERSION } from '../../crds/api-group.ts';
import type { KubeApi } from '../../kube/client.ts';
import { isConflict, isNotFound } from '../../kube/errors.ts';
import type { KubeObject } from '../../kube/objects.ts';
import { KubePath } from '../../kube/paths.ts';
import { holderKeyFromText } from '../../run-request/auth/held-run.ts';
import { holderKeyData } from '../render/holder-key.ts';
import { HOLDER_KEY_DATA_KEY, HOLDER_KEY_SECRET } from '../render/names.ts';

export interface SecretName {
  namespace: string;
  name: string;
}

/** 32 random bytes, stored as hex: `holderKeyFromText` reads hex back into the bytes. */
const NEW_KEY_BYTES = 32;

function secretPath(secret: SecretName, named = true): KubePath {
  const collection = KubePath.of({ version: 'v1', namespace: secret.namespace, resource: 'secrets' });
  return named ? collection.named(secret.name) : collection;
}

function keyOf(secret: V1Secret, where: SecretName): Uint8Array {
  const encoded = secret.data?.[HOLDER_KEY_DATA_KEY];
  if (encoded === undefined) throw new Error(`the holder key Secret ${where.namespace}/${where.name} has no "${HOLDER_KEY_DATA_KEY}" entry`);
  try {
    return holderKeyFromText(Buffer.from(encoded, 'base64').toString('utf8'));
  } catch (error) {
    throw new Error(`the holder key Secret ${where.namespace}/${where.name}: ${(error as Error).message}`, { cause: error });
  }
}

/**
 * The hand-over key of the App namespace `namespace`, for the operator's apply of its Secret
 * (render/holder-key.ts): the one the Secret holds, kept as it is — so an install whose keys were derived
 * from a root key by an earlier version keeps them, and its sidecars and held calls keep working — or a new
 * random one, derived from nothing, when the namespace has none.
 */
export async function namespaceHolderKey(api: KubeApi, namespace: string): Promise<Uint8Array> {
  const where = { namespace, name: HOLDER_KEY_SECRET };
  const found = await api.find<V1Secret & KubeObject>(secretPath(where));
  return found === undefined ? randomBytes(NEW_KEY_BYTES) : keyOf(found, where);
}

/** How long a namespace's key, once read, is used before it is read again (a deleted Secret made anew). */
const NAMESPACE_KEY_REUSE_MS = 60_000;

/**
 * The hand-over keys of the App namespaces as the holder (operator or activator) uses them: each read from
 * that namespace's Secret `runlet-holder-key`, which the operator makes — a `get` of that one name, no root
 * key anywhere from which they all derive. Rejects, saying so, while a namespace has none yet.
 */
export function namespaceHolderKeys(api: KubeApi, now: () => number = Date.now): (namespace: string) => Promise<Uint8Array> {
  const read = new Map<string, { at: number; key: Promise<Uint8Array> }>();
  return (namespace) => {
    const known = read.get(namespace);
    if (known !== undefined && now() - known.at < NAMESPACE_KEY_REUSE_MS) return known.key;
    const where = { namespace, name: HOLDER_KEY_SECRET };
    const key = api.find<V1Secret & KubeObject>(secretPath(where)).then((found) => {
      if (found === undefined) throw new Error(`namespace ${namespace} has no hand-over key yet: the operator makes the Secret ${HOLDER_KEY_SECRET} there with its first App`);
      return keyOf(found, where);
    });
    const entry = { at: now(), key };
    read.set(namespace, entry);
    // A failed read is not reused.
    key.catch(() => {
      if (read.get(namespace) === entry) read.delete(namespace);
    });
    return key;
  };
}

/**
 * An earlier version kept in the release namespace a root key, `runlet-holder-key`, from which every App
 * namespace's key derived (and the activators held it). Those keys are kept (namespaceHolderKey), the root is
 * deleted: whoever held it could have signed for every namespace. Not while Apps live in the release namespace:
 * their sidecars read that very Secret as their namespace's key (the earlier version made them no copy), and a
 * new key would make their pods' hand-overs fail until they restart. Nor a Secret owned by Apps, nor the control
 * key's Secret itself.
 */
export async function retireRootHolderKey(api: KubeApi, releaseNamespace: string, controlKey: SecretName): Promise<boolean> {
  const where = { namespace: releaseNamespace, name: HOLDER_KEY_SECRET };
  if (controlKey.namespace === where.namespace && controlKey.name === where.name) return false;
  const found = await api.find<V1Secret & KubeObject>(secretPath(where));
  if (found === undefined || (found.metadata?.ownerReferences ?? []).length > 0) return false;
  const apps = await api.list(KubePath.of({ group: RUNLET_GROUP, version: RUNLET_VERSION, namespace: releaseNamespace, resource: APP_PLURAL }));
  if (apps.items.length > 0) return false;
  await api.delete(secretPath(where), { uid: found.metadata?.uid }).catch((error: unknown) => {
    if (!isNotFound(error)) throw error;
  });
  return true;
}

/**
 * The control key as the activators read it: from its Secret, which the operator makes (`ensureHolderKey`), waited
 * for while it does not exist yet. The activators' Role cannot create Secrets in the operator's namespace: a
 * create cannot be limited to a name, and one there could put a Secret of its choosing where the operator looks
 * (the results store's DSN, at the first install). Any error but a missing Secret is thrown.
 */
export async function readHolderKeyWhenMade(api: KubeApi, where: SecretName, options: { retryMs: number; signal: AbortSignal; onWaiting(): void }): Promise<Uint8Array> {
  for (let waited = false; ; waited = true) {
    const found = await api.find<V1Secret & KubeObject>(secretPath(where));
    if (found !== undefined) return keyOf(found, where);
    if (!waited) options.onWaiting();
    await sleep(options.retryMs, undefined, { signal: options.signal }).catch(() => {
      throw new Error(`stopped while waiting for the holder control key Secret ${where.namespace}/${where.name}, which the operator makes`);
    });
  }
}

/** The control key: read from its Secret, or made and stored there when the Secret does not exist. */
export async function ensureHolderKey(api: KubeApi, where: SecretName): Promise<Uint8Array> {
  const found = await api.find<V1Secret & KubeObject>(secretPath(where));
  if (found !== undefined) return keyOf(found, where);
  const secret: V1Secret & KubeObject = {
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'Opaque',
    metadata: { name: where.name, namespace: where.namespace, labels: { 'app.kubernetes.io/part-of': 'runlet', 'app.kubernetes.io/component': 'holder-control' } },
    data: holderKeyData(randomBytes(NEW_KEY_BYTES)),
  };
  try {
    return keyOf(await api.create(secretPath(where, false), secret), where);
  } catch (error) {
    // Another replica created it first: its key is the one.
    if (!isConflict(error)) throw new Error(`creating the holder control key Secret ${where.namespace}/${where.name}: ${(error as Error).message}`, { cause: error });
    return keyOf(await api.get<V1Secret & KubeObject>(secretPath(where)), where);
  }
}
