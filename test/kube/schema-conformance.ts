// What a real API server does to a custom resource with its CRD's structural schema before storing it:
// pruning (fields the schema does not declare are dropped, unless `x-kubernetes-preserve-unknown-fields`)
// and defaulting (`default` filled in where a field is absent and its parent present; a null in a field
// that is not `nullable` counts as absent). apiVersion, kind and
// metadata are the server's own at the root and never pruned. Validation against the schema (types,
// patterns, CEL) is not modelled: the operator checks Apps itself, as it must on older clusters.

import type { JsonSchema } from './resources.ts';
import { isPlainObject, type KubeObject } from './types.ts';

const ROOT_FIELDS = new Set(['apiVersion', 'kind', 'metadata']);

function conform(value: unknown, schema: JsonSchema, isRoot: boolean): void {
  if (Array.isArray(value)) {
    if (schema.items !== undefined) for (const item of value) conform(item, schema.items, false);
    return;
  }
  if (!isPlainObject(value)) return;
  const properties = schema.properties ?? {};
  const additional = schema.additionalProperties;
  const preserveUnknown = additional === true || schema['x-kubernetes-preserve-unknown-fields'] === true;
  for (const [key, member] of Object.entries(value)) {
    if (isRoot && ROOT_FIELDS.has(key)) continue;
    const declared = properties[key] ?? (isPlainObject(additional) ? additional : undefined);
    // A null where the schema does not allow one is dropped (then defaulted), as since Kubernetes 1.20.
    if (member === null && declared !== undefined && declared.nullable !== true) delete value[key];
    else if (declared !== undefined) conform(member, declared, false);
    else if (!preserveUnknown) delete value[key];
  }
  for (const [key, declared] of Object.entries(properties)) {
    if (value[key] === undefined && declared.default !== undefined) {
      value[key] = structuredClone(declared.default);
      conform(value[key], declared, false);
    }
  }
}

/** Prunes and defaults `object` in place by the schema of its CRD version. */
export function conformToSchema(object: KubeObject, schema: JsonSchema): void {
  conform(object, schema, true);
}
