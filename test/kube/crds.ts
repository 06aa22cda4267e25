// CustomResourceDefinitions: what a CRD makes the server serve, and the status the real apiextensions
// controllers would give it (names accepted, Established). Registration happens synchronously when the
// CRD is written, so a client may create custom objects right after creating the CRD.

import { customResourceType, type JsonSchema, type PrinterColumn, type ResourceType } from './resources.ts';
import type { StatusCause } from './status.ts';
import { isPlainObject, timestamp, type KubeObject } from './types.ts';

interface CrdNames {
  plural: string;
  singular?: string;
  kind: string;
  shortNames?: string[];
  categories?: string[];
}

interface CrdVersion {
  name: string;
  served: boolean;
  storage: boolean;
  subresources?: { status?: object };
  schema?: { openAPIV3Schema?: JsonSchema };
  additionalPrinterColumns?: PrinterColumn[];
}

interface CrdSpec {
  group: string;
  names: CrdNames;
  scope: 'Namespaced' | 'Cluster';
  versions: CrdVersion[];
}

export const CRD_RESOURCE_KEY = 'customresourcedefinitions.apiextensions.k8s.io';

function specOf(crd: KubeObject): CrdSpec | undefined {
  const spec = crd.spec;
  if (!isPlainObject(spec) || !isPlainObject(spec.names) || !Array.isArray(spec.versions)) return undefined;
  return spec as unknown as CrdSpec; // shape checked field by field in validateCrd before any use
}

export function validateCrd(crd: KubeObject): StatusCause[] {
  const invalid = (field: string, message: string): StatusCause[] => [{ reason: 'FieldValueInvalid', field, message }];
  const spec = specOf(crd);
  if (spec === undefined) return invalid('spec', 'must have group, names and versions');
  const { group, names, scope, versions } = spec;
  if (typeof group !== 'string' || group === '') return invalid('spec.group', 'is required');
  if (typeof names.plural !== 'string' || typeof names.kind !== 'string') {
    return invalid('spec.names', 'plural and kind are required');
  }
  if (crd.metadata.name !== `${names.plural}.${group}`) {
    return invalid('metadata.name', `must be spec.names.plural+"."+spec.group (${names.plural}.${group})`);
  }
  if (scope !== 'Namespaced' && scope !== 'Cluster') return invalid('spec.scope', 'must be Namespaced or Cluster');
  if (versions.some((v) => !isPlainObject(v) || typeof v.name !== 'string' || typeof v.served !== 'boolean')) {
    return invalid('spec.versions', 'every version needs a name and served');
  }
  if (versions.length === 0 || versions.filter((v) => v.storage === true).length !== 1) {
    return invalid('spec.versions', 'must have exactly one storage version');
  }
  return [];
}

/** The kinds a (valid) CRD serves: one per served version. */
export function crdResourceTypes(crd: KubeObject): ResourceType[] {
  const spec = specOf(crd);
  if (spec === undefined) return [];
  return spec.versions
    .filter((version) => version.served)
    .map((version) =>
      customResourceType({
        group: spec.group,
        version: version.name,
        kind: spec.names.kind,
        plural: spec.names.plural,
        singular: spec.names.singular ?? spec.names.kind.toLowerCase(),
        namespaced: spec.scope === 'Namespaced',
        hasStatus: isPlainObject(version.subresources) && version.subresources.status !== undefined,
        shortNames: spec.names.shortNames ?? [],
        categories: spec.names.categories ?? [],
        schema: version.schema?.openAPIV3Schema,
        printerColumns: version.additionalPrinterColumns,
      }),
    );
}

/** Status as the apiextensions controllers set it once the names are accepted. */
export function establishedStatus(crd: KubeObject): Record<string, unknown> {
  const spec = specOf(crd);
  const now = timestamp();
  const condition = (type: string, reason: string, message: string): object => ({
    type,
    status: 'True',
    lastTransitionTime: now,
    reason,
    message,
  });
  return {
    conditions: [
      condition('NamesAccepted', 'NoConflicts', 'no conflicts found'),
      condition('Established', 'InitialNamesAccepted', 'the initial names have been accepted'),
    ],
    acceptedNames: spec?.names ?? {},
    storedVersions: spec?.versions.filter((v) => v.storage).map((v) => v.name) ?? [],
  };
}
