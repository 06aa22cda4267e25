// Non-apply patches: JSON merge patch (RFC 7386), JSON patch (RFC 6902), and strategic merge patch,
// which the fake treats as a merge patch (lists are replaced, never merged by key). Strategic-merge
// directives (`$patch`, `$setElementOrder/…`, `$retainKeys`, `$deleteFromPrimitiveList/…`) are refused
// rather than misapplied. Server-side apply is apply.ts.

import { KubeError, badRequest } from './status.ts';
import { deepEqual, isPlainObject } from './types.ts';

export const MERGE_PATCH = 'application/merge-patch+json';
export const STRATEGIC_MERGE_PATCH = 'application/strategic-merge-patch+json';
export const JSON_PATCH = 'application/json-patch+json';
export const APPLY_PATCH = 'application/apply-patch+yaml';

function patchFailed(message: string): KubeError {
  return new KubeError(422, 'Invalid', `the patch could not be applied: ${message}`);
}

export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isPlainObject(patch)) return withoutNulls(patch);
  const result: Record<string, unknown> = isPlainObject(target) ? structuredClone(target) : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    else result[key] = mergePatch(result[key], value);
  }
  return result;
}

/**
 * A value a merge patch sets as a whole (an array, or an object where there was none) loses the null members
 * of every object in it, however deep, as in kube-apiserver (its json-patch library prunes them): a merge
 * patch cannot write a null. Null elements of arrays stay.
 */
function withoutNulls(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutNulls);
  if (!isPlainObject(value)) return structuredClone(value);
  return Object.fromEntries(Object.entries(value).flatMap(([key, member]) => (member === null ? [] : [[key, withoutNulls(member)]])));
}

function rejectStrategicDirectives(patch: unknown, path: string): void {
  if (Array.isArray(patch)) patch.forEach((item, i) => rejectStrategicDirectives(item, `${path}[${i}]`));
  if (!isPlainObject(patch)) return;
  for (const [key, value] of Object.entries(patch)) {
    if (key.startsWith('$')) {
      throw badRequest(
        `strategic merge directive "${key}" at ${path || '.'} is not supported by the fake API server, ` +
          'which applies strategic merge patches as JSON merge patches',
      );
    }
    rejectStrategicDirectives(value, `${path}.${key}`);
  }
}

export function strategicMergePatch(target: unknown, patch: unknown): unknown {
  rejectStrategicDirectives(patch, '');
  return mergePatch(target, patch);
}

interface JsonPatchOperation {
  op: string;
  path: string;
  from?: string;
  value?: unknown;
}

function parsePointer(pointer: string): string[] {
  if (pointer === '') return [];
  if (!pointer.startsWith('/')) throw patchFailed(`JSON pointer "${pointer}" must start with "/"`);
  return pointer
    .slice(1)
    .split('/')
    .map((token) => token.replaceAll('~1', '/').replaceAll('~0', '~'));
}

type Container = Record<string, unknown> | unknown[];

/** The container holding the pointer's last token, and that token. */
function locate(document: unknown, pointer: string): [Container, string] {
  const tokens = parsePointer(pointer);
  const last = tokens.pop();
  if (last === undefined) throw patchFailed('operations on the whole document are not supported');
  let node: unknown = document;
  for (const token of tokens) {
    node = Array.isArray(node) ? node[Number(token)] : isPlainObject(node) ? node[token] : undefined;
    if (node === undefined) throw patchFailed(`path "${pointer}" does not exist`);
  }
  if (!Array.isArray(node) && !isPlainObject(node)) throw patchFailed(`path "${pointer}" is not inside an object`);
  return [node, last];
}

function arrayIndex(array: unknown[], token: string, pointer: string, forInsert: boolean): number {
  if (forInsert && token === '-') return array.length;
  const index = Number(token);
  const limit = forInsert ? array.length : array.length - 1;
  if (!/^\d+$/.test(token) || index > limit) throw patchFailed(`array index in "${pointer}" is out of range`);
  return index;
}

function read(document: unknown, pointer: string): unknown {
  const [container, token] = locate(document, pointer);
  const value = Array.isArray(container)
    ? container[arrayIndex(container, token, pointer, false)]
    : container[token];
  if (value === undefined) throw patchFailed(`path "${pointer}" does not exist`);
  return value;
}

function add(document: unknown, pointer: string, value: unknown): void {
  const [container, token] = locate(document, pointer);
  if (Array.isArray(container)) container.splice(arrayIndex(container, token, pointer, true), 0, value);
  else container[token] = value;
}

function remove(document: unknown, pointer: string): unknown {
  const value = read(document, pointer);
  const [container, token] = locate(document, pointer);
  if (Array.isArray(container)) container.splice(Number(token), 1);
  else delete container[token];
  return value;
}

function applyOperation(document: unknown, operation: JsonPatchOperation): void {
  switch (operation.op) {
    case 'add':
      return add(document, operation.path, structuredClone(operation.value));
    case 'remove':
      remove(document, operation.path);
      return;
    case 'replace':
      remove(document, operation.path);
      return add(document, operation.path, structuredClone(operation.value));
    case 'move':
      return add(document, operation.path, remove(document, operation.from ?? ''));
    case 'copy':
      return add(document, operation.path, structuredClone(read(document, operation.from ?? '')));
    case 'test':
      if (!deepEqual(read(document, operation.path), operation.value)) {
        throw patchFailed(`test operation failed at "${operation.path}"`);
      }
      return;
    default:
      throw badRequest(`unknown JSON patch operation "${operation.op}"`);
  }
}

export function jsonPatch(target: unknown, patch: unknown): unknown {
  if (!Array.isArray(patch)) throw badRequest('a JSON patch must be an array of operations');
  const document = structuredClone(target);
  for (const operation of patch) {
    if (!isPlainObject(operation) || typeof operation.op !== 'string' || typeof operation.path !== 'string') {
      throw badRequest(`malformed JSON patch operation ${JSON.stringify(operation)}`);
    }
    const from = typeof operation.from === 'string' ? operation.from : undefined;
    applyOperation(document, { op: operation.op, path: operation.path, from, value: operation.value });
  }
  return document;
}
