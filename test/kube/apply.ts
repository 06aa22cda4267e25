// Server-side apply (`application/apply-patch+yaml`), simplified: each Apply manager's field set is kept
// in managedFields (field-sets.ts). An apply merges the configuration into the live object (maps merge,
// lists and scalars are replaced whole), removes fields the manager applied last time but no longer
// does (unless another manager also owns them), and refuses with 409 to change a leaf field another
// manager owns — an Apply manager, or the Update entry of a create/update/patch (managed-fields.ts) —
// unless `force` is set, which takes the field over. Not modelled: associative lists merged by key,
// defaulting of removed fields.

import { comparePaths, fieldPathString, hasLeaf, leaves, ownableFieldSet, removeLeaf, valueAt, type FieldPath } from './field-sets.ts';
import { KubeError, type StatusCause } from './status.ts';
import { apiVersionOf, resourceKey, type ResourceType } from './resources.ts';
import { deepEqual, isPlainObject, type KubeObject, type ManagedFieldsEntry } from './types.ts';

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

interface FieldConflict {
  owner: ManagedFieldsEntry;
  path: FieldPath;
}

/** How the real server names a manager in conflicts: Update managers with the version they wrote. */
function describeManager(owner: ManagedFieldsEntry): string {
  return owner.operation === 'Update' ? `"${owner.manager}" using ${owner.apiVersion}` : `"${owner.manager}"`;
}

/** The real server's 409: one cause per field, the message grouping fields by manager (sorted). */
function conflictError(conflicts: FieldConflict[]): KubeError {
  const causes: StatusCause[] = conflicts.map(({ owner, path }) => ({
    reason: 'FieldManagerConflict',
    message: `conflict with ${describeManager(owner)}`,
    field: fieldPathString(path),
  }));
  if (conflicts.length === 1) {
    const message = `Apply failed with 1 conflict: ${causes[0]!.message}: ${causes[0]!.field}`;
    return new KubeError(409, 'Conflict', message, { causes });
  }
  const byManager = new Map<string, string[]>();
  for (const { owner, path } of conflicts) {
    const manager = describeManager(owner);
    byManager.set(manager, [...(byManager.get(manager) ?? []), fieldPathString(path)]);
  }
  const groups = [...byManager.keys()].sort().map((manager) => [`conflicts with ${manager}:`, ...byManager.get(manager)!.map((f) => `- ${f}`)].join('\n'));
  return new KubeError(409, 'Conflict', `Apply failed with ${conflicts.length} conflicts: ${groups.join('\n')}`, { causes });
}

/** The object after the apply, with its managedFields updated. Throws 409 on conflicts without force. */
export function serverSideApply(request: ApplyRequest): KubeObject {
  const { live, manager, subresource } = request;
  const { managedFields: _ignored, ...appliedMetadata } = request.applied.metadata;
  const applied: KubeObject = { ...request.applied, metadata: appliedMetadata };
  const appliedSet = ownableFieldSet(applied, subresource === 'status' ? 'status' : 'whole');
  const isMine = (entry: ManagedFieldsEntry): boolean =>
    entry.manager === manager && entry.operation === 'Apply' && entry.subresource === subresource;

  const entries = structuredClone(live?.metadata.managedFields ?? []);
  const previous = entries.find(isMine);
  const others = entries.filter((entry) => !isMine(entry));

  const conflicts: FieldConflict[] = [];
  for (const path of leaves(appliedSet)) {
    for (const other of others) {
      if (!hasLeaf(other.fieldsV1, path) || deepEqual(valueAt(live, path), valueAt(applied, path))) continue;
      if (request.force) removeLeaf(other.fieldsV1, path);
      else conflicts.push({ owner: other, path });
    }
  }
  // The real server reports them in field path order (its field sets are sorted).
  const byPath = (x: FieldConflict, y: FieldConflict): number => comparePaths(x.path, y.path);
  if (conflicts.length > 0) throw conflictError(conflicts.sort(byPath));

  const result: KubeObject = live === undefined ? { metadata: {} } : structuredClone(live);
  for (const path of leaves(previous?.fieldsV1 ?? {})) {
    const stillOwned = hasLeaf(appliedSet, path) || others.some((other) => hasLeaf(other.fieldsV1, path));
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
  const kept = entries.filter((e) => e === previous || Object.keys(e.fieldsV1).length > 0);
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
