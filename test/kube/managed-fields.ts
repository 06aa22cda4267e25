// Field ownership of non-apply writes (create, update, the patches): as on a real server, the writer's
// manager (`fieldManager`, else the User-Agent's product) records an `Update` entry owning every field the
// write set or changed, and those fields leave every other manager's set — an Apply manager included, so a
// later apply of a different value by that manager conflicts with the writer (apply.ts).

import { addLeaf, leaves, ownableFieldSet, removeLeaf, valueAt } from './field-sets.ts';
import { deepEqual, type KubeObject, type ManagedFieldsEntry } from './types.ts';

export interface UpdateWriter {
  manager: string;
  apiVersion: string;
  subresource: 'status' | undefined;
  now: string;
}

/** What the real server records when a write names no fieldManager: the User-Agent up to its first "/". */
export function managerFromUserAgent(userAgent: string | undefined): string {
  const product = (userAgent ?? '').split('/')[0]!.trim();
  return product === '' ? 'unknown' : product;
}

/** managedFields after `writer` turned `before` (undefined on create) into `after`. */
export function recordUpdate(
  writer: UpdateWriter,
  before: KubeObject | undefined,
  after: KubeObject,
  hasStatusSubresource: boolean,
): ManagedFieldsEntry[] {
  const scope = writer.subresource === 'status' ? 'status' : hasStatusSubresource ? 'main' : 'whole';
  const afterSet = ownableFieldSet(after, scope);
  const beforeSet = before === undefined ? {} : ownableFieldSet(before, scope);
  const changed = leaves(afterSet).filter((path) => before === undefined || !deepEqual(valueAt(before, path), valueAt(after, path)));
  const removed = leaves(beforeSet).filter((path) => valueAt(after, path) === undefined);
  if (changed.length === 0 && removed.length === 0) return before?.metadata.managedFields ?? [];

  const entries = structuredClone(before?.metadata.managedFields ?? []);
  const isWriters = (entry: ManagedFieldsEntry): boolean =>
    entry.manager === writer.manager &&
    entry.operation === 'Update' &&
    entry.apiVersion === writer.apiVersion &&
    entry.subresource === writer.subresource;
  let own = entries.find(isWriters);
  if (own === undefined && changed.length > 0) {
    own = { manager: writer.manager, operation: 'Update', apiVersion: writer.apiVersion, time: writer.now, fieldsType: 'FieldsV1', fieldsV1: {} };
    if (writer.subresource !== undefined) own.subresource = writer.subresource;
    entries.push(own);
  }
  for (const entry of entries) {
    for (const path of changed) {
      if (entry === own) addLeaf(entry.fieldsV1, path);
      else removeLeaf(entry.fieldsV1, path);
    }
    for (const path of removed) removeLeaf(entry.fieldsV1, path);
  }
  if (own !== undefined && changed.length > 0) own.time = writer.now;
  return entries.filter((entry) => Object.keys(entry.fieldsV1).length > 0);
}
