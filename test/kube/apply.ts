// Server-side apply (`application/apply-patch+yaml`), simplified: each Apply manager's field set is kept
// in managedFields (FieldsV1 shape). An apply merges the configuration into the live object (maps merge,
// lists and scalars are replaced whole), removes fields the manager applied last time but no longer
// does (unless another Apply manager also owns them), and refuses with 409 to change a leaf field another
// Apply manager owns unless `force` is set, which takes the field over. Not modelled: ownership by
// non-apply writers (Update operations), associative lists merged by key, defaulting of removed fields.

import { KubeError, type StatusCause } from './status.ts';
import { apiVersionOf, resourceKey, type ResourceType } from './resources.ts';
import { deepEqual, isPlainObject, type FieldSet, type KubeObject, type ManagedFieldsEntry } from './types.ts';

export interface ApplyRequest {
  type: ResourceType;
  name: string;
  /** The current object, or undefined when the apply creates it. */
  live: KubeObject | undefined;
  /** The applied configuration, already narrowed to what this endpoint may change (spec or status). */
  applied: KubeObject;
  manager: string;
  force: boolean;
  subresource: 'status' | undefined;
  now: string;
}

/** Metadata a manager can own; the rest of metadata identifies the object or is the server's. */
const OWNABLE_METADATA = ['labels', 'annotations', 'ownerReferences', 'finalizers'];

function fieldSetOf(value: Record<string, unknown>): FieldSet {
  const set: FieldSet = {};
  for (const [key, child] of Object.entries(value)) {
    if (child === undefined) continue;
    set[`f:${key}`] = isPlainObject(child) && Object.keys(child).length > 0 ? fieldSetOf(child) : {};
  }
  return set;
}

function appliedFieldSet(applied: KubeObject): FieldSet {
  const { apiVersion: _apiVersion, kind: _kind, metadata, ...content } = applied;
  const ownedMetadata = Object.fromEntries(Object.entries(metadata).filter(([k]) => OWNABLE_METADATA.includes(k)));
  return fieldSetOf(Object.keys(ownedMetadata).length > 0 ? { metadata: ownedMetadata, ...content } : content);
}

type FieldPath = string[];

function leaves(set: FieldSet, prefix: FieldPath = []): FieldPath[] {
  return Object.entries(set).flatMap(([key, child]) => {
    const path = [...prefix, key.slice(2)];
    return Object.keys(child).length === 0 ? [path] : leaves(child, path);
  });
}

function leafNode(set: FieldSet, path: FieldPath): FieldSet | undefined {
  let node: FieldSet | undefined = set;
  for (const segment of path) node = node?.[`f:${segment}`];
  return node !== undefined && Object.keys(node).length === 0 ? node : undefined;
}

function removeLeaf(set: FieldSet, path: FieldPath): void {
  const [head, ...rest] = path;
  const child = set[`f:${head}`];
  if (child === undefined) return;
  if (rest.length > 0) removeLeaf(child, rest);
  if (rest.length === 0 || Object.keys(child).length === 0) delete set[`f:${head}`];
}

function valueAt(object: unknown, path: FieldPath): unknown {
  return path.reduce<unknown>((node, segment) => (isPlainObject(node) ? node[segment] : undefined), object);
}

function deleteAt(object: Record<string, unknown>, path: FieldPath): void {
  const parent = valueAt(object, path.slice(0, -1));
  if (isPlainObject(parent)) delete parent[path[path.length - 1]!];
}

function mergeInto(target: Record<string, unknown>, source: Record<string, unknown>): void {
  for (const [key, value] of Object.entries(source)) {
    if (value === undefined) continue;
    const current = target[key];
    if (isPlainObject(value) && isPlainObject(current)) mergeInto(current, value);
    else target[key] = structuredClone(value);
  }
}

function conflictError(request: ApplyRequest, conflicts: { manager: string; path: FieldPath }[]): KubeError {
  const causes: StatusCause[] = conflicts.map(({ manager, path }) => ({
    reason: 'FieldManagerConflict',
    message: `conflict with "${manager}"`,
    field: `.${path.join('.')}`,
  }));
  const list = causes.map((c) => `${c.message}: ${c.field}`).join(', ');
  return new KubeError(409, 'Conflict', `Apply failed with ${conflicts.length} conflict(s): ${list}`, {
    name: request.name,
    group: request.type.group,
    kind: request.type.plural,
    causes,
  });
}

/** The object after the apply, with its managedFields updated. Throws 409 on conflicts without force. */
export function serverSideApply(request: ApplyRequest): KubeObject {
  const { live, manager, subresource } = request;
  const { managedFields: _ignored, ...appliedMetadata } = request.applied.metadata;
  const applied: KubeObject = { ...request.applied, metadata: appliedMetadata };
  const appliedSet = appliedFieldSet(applied);
  const isMine = (entry: ManagedFieldsEntry): boolean =>
    entry.manager === manager && entry.operation === 'Apply' && entry.subresource === subresource;

  const entries = structuredClone(live?.metadata.managedFields ?? []);
  const previous = entries.find(isMine);
  const otherAppliers = entries.filter((entry) => entry.operation === 'Apply' && !isMine(entry));

  const conflicts: { manager: string; path: FieldPath }[] = [];
  for (const path of leaves(appliedSet)) {
    for (const other of otherAppliers) {
      if (leafNode(other.fieldsV1, path) === undefined || deepEqual(valueAt(live, path), valueAt(applied, path))) {
        continue;
      }
      if (request.force) removeLeaf(other.fieldsV1, path);
      else conflicts.push({ manager: other.manager, path });
    }
  }
  if (conflicts.length > 0) throw conflictError(request, conflicts);

  const result: KubeObject = live === undefined ? { metadata: {} } : structuredClone(live);
  for (const path of leaves(previous?.fieldsV1 ?? {})) {
    const stillOwned =
      leafNode(appliedSet, path) !== undefined ||
      otherAppliers.some((other) => leafNode(other.fieldsV1, path) !== undefined);
    if (!stillOwned) deleteAt(result, path);
  }
  mergeInto(result, applied);

  const unchanged = previous !== undefined && deepEqual(previous.fieldsV1, appliedSet);
  const entry: ManagedFieldsEntry = {
    manager,
    operation: 'Apply',
    apiVersion: apiVersionOf(request.type),
    time: unchanged ? previous.time : request.now,
    fieldsType: 'FieldsV1',
    fieldsV1: appliedSet,
  };
  if (subresource !== undefined) entry.subresource = subresource;
  const kept = entries.filter((e) => e === previous || e.operation !== 'Apply' || Object.keys(e.fieldsV1).length > 0);
  result.metadata.managedFields =
    previous === undefined ? [...kept, entry] : kept.map((e) => (e === previous ? entry : e));
  return result;
}

/** Why an applied configuration cannot be applied at this URL, or undefined when it can. */
export function appliedIdentityProblem(applied: KubeObject, type: ResourceType, name: string): string | undefined {
  if (applied.apiVersion !== apiVersionOf(type) || applied.kind !== type.kind) {
    const endpoint = `${resourceKey(type)} endpoint (${apiVersionOf(type)} ${type.kind})`;
    return `apply of ${applied.apiVersion}/${applied.kind} sent to the ${endpoint}`;
  }
  if (applied.metadata.name !== name) {
    const appliedName = String(applied.metadata.name);
    return `the name of the applied object (${appliedName}) does not match the name on the URL (${name})`;
  }
  return undefined;
}
