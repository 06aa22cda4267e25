// Field sets of managedFields (FieldsV1 shape, `{"f:spec": {"f:replicas": {}}}`, `{}` marking a leaf), as
// server-side apply and the ownership of Update writes use them. Simplified: maps are walked key by key,
// lists and scalars are leaves (no `k:`/`v:` members of associative lists, no `.` markers).

import { isPlainObject, type FieldSet, type KubeObject } from './types.ts';

/** Metadata a manager can own; the rest of metadata identifies the object or is the server's. */
const OWNABLE_METADATA = ['labels', 'annotations', 'ownerReferences', 'finalizers'];

export type FieldPath = string[];

function fieldSetOfValue(value: Record<string, unknown>): FieldSet {
  const set: FieldSet = {};
  for (const [key, child] of Object.entries(value)) {
    if (child === undefined) continue;
    set[`f:${key}`] = isPlainObject(child) && Object.keys(child).length > 0 ? fieldSetOfValue(child) : {};
  }
  return set;
}

/**
 * The fields an object (or an applied configuration) sets that a manager can own: all but apiVersion, kind and
 * the server's metadata; `status` alone for the status subresource, everything but `status` when the kind
 * has that subresource.
 */
export function ownableFieldSet(object: KubeObject, scope: 'main' | 'status' | 'whole'): FieldSet {
  const { apiVersion: _apiVersion, kind: _kind, metadata, status, ...content } = object;
  if (scope === 'status') return status === undefined ? {} : fieldSetOfValue({ status });
  const ownedMetadata = Object.fromEntries(Object.entries(metadata).filter(([k]) => OWNABLE_METADATA.includes(k)));
  const owned: Record<string, unknown> = Object.keys(ownedMetadata).length > 0 ? { metadata: ownedMetadata, ...content } : content;
  if (scope === 'whole' && status !== undefined) owned.status = status;
  return fieldSetOfValue(owned);
}

export function leaves(set: FieldSet, prefix: FieldPath = []): FieldPath[] {
  return Object.entries(set).flatMap(([key, child]) => {
    const path = [...prefix, key.slice(2)];
    return Object.keys(child).length === 0 ? [path] : leaves(child, path);
  });
}

export function hasLeaf(set: FieldSet, path: FieldPath): boolean {
  let node: FieldSet | undefined = set;
  for (const segment of path) node = node?.[`f:${segment}`];
  return node !== undefined && Object.keys(node).length === 0;
}

export function addLeaf(set: FieldSet, path: FieldPath): void {
  let node = set;
  for (const segment of path) node = node[`f:${segment}`] ??= {};
}

export function removeLeaf(set: FieldSet, path: FieldPath): void {
  const [head, ...rest] = path;
  const child = set[`f:${head}`];
  if (child === undefined) return;
  if (rest.length > 0) removeLeaf(child, rest);
  if (rest.length === 0 || Object.keys(child).length === 0) delete set[`f:${head}`];
}

export function valueAt(object: unknown, path: FieldPath): unknown {
  return path.reduce<unknown>((node, segment) => (isPlainObject(node) ? node[segment] : undefined), object);
}

/** `.spec.replicas`, as the real server names a field in conflicts. */
export function fieldPathString(path: FieldPath): string {
  return `.${path.join('.')}`;
}

/** Field paths in the order of the real server's sorted field sets: segment by segment. */
export function comparePaths(a: FieldPath, b: FieldPath): number {
  for (let i = 0; i < Math.min(a.length, b.length); i += 1) {
    if (a[i] !== b[i]) return a[i]! < b[i]! ? -1 : 1;
  }
  return a.length - b.length;
}
