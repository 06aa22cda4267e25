// Per-kind server behaviour beyond generic storage: what the real API server (or the controllers that
// run inside it) does for secrets, namespaces, role bindings and CustomResourceDefinitions on every write.

import { CRD_RESOURCE_KEY, crdResourceTypes, establishedStatus, validateCrd } from './crds.ts';
import type { ResourceRegistry } from './resources.ts';
import type { StatusCause } from './status.ts';
import { isPlainObject, type KubeObject } from './types.ts';

export interface KindBehavior {
  /** Server-side defaulting and kind validation of the object about to be stored; mutates `next`. */
  prepare?(next: KubeObject, previous: KubeObject | undefined): StatusCause[];
  /** After the object was stored. */
  stored?(object: KubeObject): void;
  /** After the object was removed from storage. */
  removed?(object: KubeObject): void;
}

/** Secrets: `stringData` is write-only convenience, merged into base64 `data` on write. */
const secrets: KindBehavior = {
  prepare(next) {
    const { stringData } = next;
    if (stringData === undefined) return [];
    if (!isPlainObject(stringData)) {
      return [{ reason: 'FieldValueInvalid', field: 'stringData', message: 'must be a map of strings' }];
    }
    const data = isPlainObject(next.data) ? { ...next.data } : {};
    for (const [key, value] of Object.entries(stringData)) data[key] = Buffer.from(String(value)).toString('base64');
    next.data = data;
    delete next.stringData;
    return [];
  },
};

/** Namespaces start Active; termination (phase Terminating) is lifecycle.ts's job. */
const namespaces: KindBehavior = {
  prepare(next, previous) {
    if (previous === undefined) next.status = { phase: 'Active' };
    return [];
  },
};

/**
 * Role bindings: `roleRef` is immutable (the real server answers 422 "cannot change roleRef"); pointing a
 * binding at another role means deleting and re-creating it.
 */
const roleBindings: KindBehavior = {
  prepare(next, previous) {
    const before = isPlainObject(previous?.roleRef) ? previous.roleRef : {};
    const after = isPlainObject(next.roleRef) ? next.roleRef : {};
    const same = ['apiGroup', 'kind', 'name'].every((field) => before[field] === after[field]);
    if (previous === undefined || same) return [];
    return [{ reason: 'FieldValueInvalid', field: 'roleRef', message: 'cannot change roleRef' }];
  },
};

function customResourceDefinitions(
  registry: ResourceRegistry,
  removeAllObjects: (resourceKey: string) => void,
): KindBehavior {
  return {
    prepare(next) {
      const causes = validateCrd(next);
      if (causes.length > 0) return causes;
      const { group, names } = next.spec as { group: string; names: { plural: string } };
      if (registry.isBuiltin(group, names.plural)) {
        const message = 'conflicts with a built-in resource';
        return [{ reason: 'FieldValueInvalid', field: 'spec.names.plural', message }];
      }
      next.status ??= establishedStatus(next);
      return [];
    },
    stored(crd) {
      registry.setCustom(crd.metadata.name!, crdResourceTypes(crd));
    },
    removed(crd) {
      // The real server deletes all custom objects before the CRD goes away; so does the fake, at once.
      removeAllObjects(crd.metadata.name!);
      registry.removeCustom(crd.metadata.name!);
    },
  };
}

export function kindBehaviors(
  registry: ResourceRegistry,
  removeAllObjects: (resourceKey: string) => void,
): Map<string, KindBehavior> {
  return new Map([
    ['secrets', secrets],
    ['namespaces', namespaces],
    ['rolebindings.rbac.authorization.k8s.io', roleBindings],
    ['clusterrolebindings.rbac.authorization.k8s.io', roleBindings],
    [CRD_RESOURCE_KEY, customResourceDefinitions(registry, removeAllObjects)],
  ]);
}
