// Table renderings (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`), what `kubectl get` asks for:
// a custom resource's columns are Name plus its CRD version's additionalPrinterColumns (JSONPath, simple
// `.a.b[0].c` paths only); every other kind gets Name and Age (the real server has per-kind columns for
// built-ins, e.g. a ConfigMap's Data, which the fake leaves out). Rows carry the object as
// `includeObject` asks: PartialObjectMetadata (default), Object or None.

import type { PrinterColumn, ResourceType } from './resources.ts';
import { badRequest } from './status.ts';
import { isPlainObject, type KubeObject } from './types.ts';

interface ColumnDefinition {
  name: string;
  type: string;
  format: string;
  description: string;
  priority: number;
}

const NAME_COLUMN: ColumnDefinition = {
  name: 'Name',
  type: 'string',
  format: 'name',
  description: 'Name must be unique within a namespace.',
  priority: 0,
};
const AGE_COLUMN: PrinterColumn = {
  name: 'Age',
  type: 'date',
  jsonPath: '.metadata.creationTimestamp',
  description: 'CreationTimestamp is a timestamp representing the server time when this object was created.',
};

export function acceptsTable(accept: string): boolean {
  return accept.split(',').some((type) => /(^|;)\s*as=Table(\s*;|$)/.test(type) && type.includes('g=meta.k8s.io'));
}

function columnsOf(type: ResourceType): PrinterColumn[] {
  return type.printerColumns !== undefined && type.printerColumns.length > 0 ? [...type.printerColumns] : [AGE_COLUMN];
}

/** `.status.conditions[0].type` (optionally in `{…}`) to its segments; other JSONPath is refused. */
function pathSegments(jsonPath: string): (string | number)[] {
  const path = jsonPath.replace(/^\{(.*)\}$/, '$1');
  if (!/^(\.[A-Za-z0-9_-]+|\[\d+\])+$/.test(path)) {
    throw badRequest(`printer column JSONPath ${jsonPath} is beyond the fake API server's simple paths`);
  }
  return [...path.matchAll(/\.([A-Za-z0-9_-]+)|\[(\d+)\]/g)].map((m) => (m[1] !== undefined ? m[1] : Number(m[2])));
}

function lookup(object: unknown, jsonPath: string): unknown {
  return pathSegments(jsonPath).reduce<unknown>((node, segment) => {
    if (typeof segment === 'number') return Array.isArray(node) ? node[segment] : undefined;
    return isPlainObject(node) ? node[segment] : undefined;
  }, object);
}

/** kubectl's HumanDuration (k8s.io/apimachinery/pkg/util/duration), as the real server renders date columns. */
export function humanDuration(milliseconds: number): string {
  const seconds = Math.floor(milliseconds / 1000);
  if (seconds < -1) return '<invalid>';
  if (seconds < 0) return '0s';
  if (seconds < 120) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  const withRest = (major: number, unit: string, minor: number, minorUnit: string): string =>
    minor === 0 ? `${major}${unit}` : `${major}${unit}${minor}${minorUnit}`;
  if (minutes < 10) return withRest(minutes, 'm', seconds % 60, 's');
  if (minutes < 180) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  if (hours < 8) return withRest(hours, 'h', minutes % 60, 'm');
  if (hours < 48) return `${hours}h`;
  if (hours < 24 * 8) return withRest(Math.floor(hours / 24), 'd', hours % 24, 'h');
  if (hours < 24 * 365 * 2) return `${Math.floor(hours / 24)}d`;
  const years = Math.floor(hours / 24 / 365);
  if (hours < 24 * 365 * 8) return withRest(years, 'y', Math.floor(hours / 24) % 365, 'd');
  return `${years}y`;
}

function cell(column: PrinterColumn, object: KubeObject): unknown {
  const value = lookup(object, column.jsonPath);
  if (value === undefined || value === null) return null;
  if (column.type === 'date' && typeof value === 'string') return humanDuration(Date.now() - Date.parse(value));
  return isPlainObject(value) || Array.isArray(value) ? JSON.stringify(value) : value;
}

function rowObject(object: KubeObject, includeObject: string | null): unknown {
  switch (includeObject ?? 'PartialObjectMetadata') {
    case 'None':
      return undefined;
    case 'Object':
      return object;
    case 'PartialObjectMetadata':
      return { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: object.metadata };
    default:
      throw badRequest(`includeObject: unsupported value "${includeObject}": None, Object or PartialObjectMetadata`);
  }
}

/** A Table of `objects` (rendered in the requested version), with the list's metadata. */
export function listTable(type: ResourceType, objects: KubeObject[], metadata: object, includeObject: string | null): object {
  const columns = columnsOf(type);
  const columnDefinitions: ColumnDefinition[] = [
    NAME_COLUMN,
    ...columns.map((column) => ({
      name: column.name,
      type: column.type,
      format: column.format ?? '',
      description: column.description ?? `Custom resource definition column (in JSONPath format): ${column.jsonPath}`,
      priority: column.priority ?? 0,
    })),
  ];
  const rows = objects.map((object) => {
    const row: Record<string, unknown> = { cells: [object.metadata.name, ...columns.map((column) => cell(column, object))] };
    const included = rowObject(object, includeObject);
    if (included !== undefined) row.object = included;
    return row;
  });
  return { kind: 'Table', apiVersion: 'meta.k8s.io/v1', metadata, columnDefinitions, rows };
}

export function objectTable(type: ResourceType, object: KubeObject, includeObject: string | null): object {
  return listTable(type, [object], { resourceVersion: object.metadata.resourceVersion }, includeObject);
}
