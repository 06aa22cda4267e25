// The key the holder's hand-over keys come from (run-request/auth/held-run.ts). It lives in a Secret in the
// operator's namespace: made here, at start, with a random key when it is missing — so no key is ever published
// in install.yaml or the chart's defaults — or read when it exists (one written by a concurrent replica, which
// makes our create a 409, or one the cluster's admin provided). Every replica reads the same Secret. It never
// leaves the operator's namespace: each App namespace gets a key of its own derived from it (`holderKeysFor`),
// which the leader copies there (render/holder-key.ts) and the holder signs that namespace's hand-overs with. A
// tenant who reads the copy in their namespace can sign hand-overs only their own namespace's sidecars trust.
import { createHmac, randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { V1Secret } from '@kubernetes/client-node';
import type { KubeApi } from '../../kube/client.ts';
import { isConflict } from '../../kube/errors.ts';
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
 * The key of the App namespace `namespace`: HMAC-SHA256 of its name under the operator's key, so one namespace's
 * key says nothing of another's, and nothing more needs storing (a rotation of the operator's key rotates all).
 */
export function namespaceHolderKey(key: Uint8Array, namespace: string): Uint8Array {
  return createHmac('sha256', key).update(`runlet holder key for namespace ${namespace}`).digest();
}

/**
 * The hand-over key of each App namespace. In the operator's own namespace, when the operator's Secret has the
 * copies' name, its Apps' sidecars read that Secret itself (no copy can replace it): there the key is the
 * operator's own — whoever reads Secrets in that namespace reads it anyway.
 */
/**
 * The key the operator signs its requests to the holders with (list the calls they hold, cancel one:
 * activator/hold-control.ts): derived from the operator's key, never copied into an App namespace, so no
 * tenant holds it.
 */
export function holderControlKey(key: Uint8Array): Uint8Array {
  return createHmac('sha256', key).update('runlet holder control').digest();
}

export function holderKeysFor(key: Uint8Array, source: SecretName): (namespace: string) => Uint8Array {
  return (namespace) => (namespace === source.namespace && source.name === HOLDER_KEY_SECRET ? key : namespaceHolderKey(key, namespace));
}

/**
 * The holder key as the activators read it: from its Secret, which the operator makes (`ensureHolderKey`), waited
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
      throw new Error(`stopped while waiting for the holder key Secret ${where.namespace}/${where.name}, which the operator makes`);
    });
  }
}

/** The holder key: read from its Secret, or made and stored there when the Secret does not exist. */
export async function ensureHolderKey(api: KubeApi, where: SecretName): Promise<Uint8Array> {
  const found = await api.find<V1Secret & KubeObject>(secretPath(where));
  if (found !== undefined) return keyOf(found, where);
  const secret: V1Secret & KubeObject = {
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'Opaque',
    metadata: { name: where.name, namespace: where.namespace, labels: { 'app.kubernetes.io/part-of': 'runlet', 'app.kubernetes.io/component': 'holder-key' } },
    data: holderKeyData(randomBytes(NEW_KEY_BYTES)),
  };
  try {
    return keyOf(await api.create(secretPath(where, false), secret), where);
  } catch (error) {
    // Another replica created it first: its key is the one.
    if (!isConflict(error)) throw new Error(`creating the holder key Secret ${where.namespace}/${where.name}: ${(error as Error).message}`, { cause: error });
    return keyOf(await api.get<V1Secret & KubeObject>(secretPath(where)), where);
  }
}
