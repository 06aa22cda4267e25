// Kubernetes objects as plain JSON, typed only as far as generic code reads them, and the URLs they live at.
import { KubePath } from './paths.ts';

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

/** Who set which fields, as server-side apply records it (`fieldsV1` in the FieldsV1 `f:<name>` shape). */
export interface ManagedFieldsEntry {
  manager?: string;
  operation?: string;
  subresource?: string;
  fieldsV1?: Record<string, unknown>;
}

export interface ObjectMeta {
  name?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
  managedFields?: ManagedFieldsEntry[];
}

/** Any object as the API server serves it: only the metadata is typed. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: ObjectMeta;
}

export interface KubeList<T> {
  metadata?: { resourceVersion?: string; continue?: string };
  items: T[];
}

/** Where an object lives: enough to build its URL. */
export interface ObjectRef {
  apiVersion: string;
  kind: string;
  namespace?: string;
  name: string;
}

/**
 * The URL plural of a kind, guessed as client-go's UnsafeGuessKindToResource does (no discovery round trip):
 * right for every kind whose CRD or built-in definition follows the convention, as all that callers name do.
 */
export function pluralOf(kind: string): string {
  const lower = kind.toLowerCase();
  // client-go's one exception: Endpoints is already plural.
  if (lower === 'endpoints') return lower;
  if (lower.endsWith('s')) return `${lower}es`;
  if (lower.endsWith('y')) return `${lower.slice(0, -1)}ies`;
  return `${lower}s`;
}

/** `/apis/apps/v1/namespaces/ns/deployments/name`, or the collection when name is omitted (kube/paths.ts). */
export function resourcePath(ref: Omit<ObjectRef, 'name'> & { name?: string }, subresource?: 'status' | 'scale'): KubePath {
  const slash = ref.apiVersion.indexOf('/');
  const [group, version] = slash === -1 ? ['', ref.apiVersion] : [ref.apiVersion.slice(0, slash), ref.apiVersion.slice(slash + 1)];
  return KubePath.of({ group, version, namespace: ref.namespace, resource: pluralOf(ref.kind), name: ref.name, subresource });
}

/** The ref of an object (apiVersion, kind and metadata.name must be set). */
export function refOf(object: KubeObject): ObjectRef {
  const { apiVersion, kind } = object;
  const name = object.metadata?.name;
  if (!apiVersion || !kind || !name) throw new Error(`object lacks apiVersion, kind or metadata.name: ${JSON.stringify(object).slice(0, 200)}`);
  return { apiVersion, kind, name, namespace: object.metadata?.namespace };
}

/** metav1.Time: RFC 3339 in whole seconds. */
export function metaTime(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}
