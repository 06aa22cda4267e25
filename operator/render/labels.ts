// How a child object is marked as an App's: the labels every child carries, the immutable selector of
// its pods, and the controller owner reference that lets the API server's garbage collector delete it
// with the App.
import type { V1ObjectMeta, V1OwnerReference } from '@kubernetes/client-node';
import type { App } from '../../crds/app-schema.ts';
import { APP_KIND, APP_LABEL, RUNLET_API_VERSION } from '../../crds/api-group.ts';
import { namespaceOf } from './names.ts';

export const NAME_LABEL = 'app.kubernetes.io/name';
export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
export const MANAGED_BY = 'runlet';
/** Label selector of everything the operator manages. */
export const MANAGED_SELECTOR = `${MANAGED_BY_LABEL}=${MANAGED_BY}`;

/** Pod-template annotation: a digest of the code ConfigMap, so a code change rolls the pods. */
export const CODE_HASH_ANNOTATION = 'runlet.dev/code-hash';

export function appLabels(app: App): Record<string, string> {
  return { [NAME_LABEL]: app.metadata.name, [MANAGED_BY_LABEL]: MANAGED_BY, [APP_LABEL]: app.metadata.name };
}

/** A Deployment's selector cannot change, so it holds only what never will: the App's name. */
export function selectorLabels(app: App): Record<string, string> {
  return { [APP_LABEL]: app.metadata.name };
}

export function ownerReference(app: App): V1OwnerReference {
  const uid = app.metadata.uid;
  if (!uid) throw new Error(`App "${app.metadata.name}" has no uid; only stored Apps can own objects`);
  return { apiVersion: RUNLET_API_VERSION, kind: APP_KIND, name: app.metadata.name, uid, controller: true, blockOwnerDeletion: true };
}

/** Metadata of a child named `name`: namespace, labels and the owner reference. */
export function childMetadata(app: App, name: string): V1ObjectMeta {
  return { name, namespace: namespaceOf(app), labels: appLabels(app), ownerReferences: [ownerReference(app)] };
}

/** The App a child belongs to, from its controller owner reference. */
export function owningAppName(child: { metadata?: { ownerReferences?: V1OwnerReference[] } }): string | undefined {
  return child.metadata?.ownerReferences?.find((ref) => ref.controller === true && ref.kind === APP_KIND && ref.apiVersion === RUNLET_API_VERSION)?.name;
}
