// The generic object validation every real API server applies (names, labels, annotations, finalizers),
// so that code producing objects a cluster would reject fails here too. Kind-specific schema validation
// (and CRD openAPIV3Schema validation) is not done.

import type { ResourceType } from './resources.ts';
import type { StatusCause } from './status.ts';
import { isPlainObject, type KubeObject } from './types.ts';

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_1035_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const QUALIFIED_NAME_PART = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;

function nameProblem(type: ResourceType, name: string): string | undefined {
  if (type.group === 'rbac.authorization.k8s.io') {
    // RBAC names are path segments: `system:controller:foo` is valid.
    const invalidSegment = name === '.' || name === '..' || /[/%]/.test(name);
    return invalidSegment ? 'may not be "." or ".." or contain "/" or "%"' : undefined;
  }
  if (type.group === '' && type.plural === 'namespaces') {
    return name.length <= 63 && DNS_LABEL.test(name) ? undefined : 'must be a lowercase RFC 1123 label';
  }
  if (type.group === '' && type.plural === 'services') {
    return name.length <= 63 && DNS_1035_LABEL.test(name) ? undefined : 'must be a DNS-1035 label';
  }
  return name.length <= 253 && DNS_SUBDOMAIN.test(name) ? undefined : 'must be a lowercase RFC 1123 subdomain';
}

function qualifiedNameProblem(key: string): string | undefined {
  const parts = key.split('/');
  const name = parts.pop() ?? '';
  if (parts.length > 1) return 'may contain at most one "/"';
  const prefix = parts[0];
  if (prefix !== undefined && (prefix.length > 253 || !DNS_SUBDOMAIN.test(prefix))) {
    return 'prefix must be a DNS subdomain';
  }
  return name.length <= 63 && QUALIFIED_NAME_PART.test(name) ? undefined : 'name part must be a qualified name';
}

function labelValueProblem(value: unknown): string | undefined {
  if (typeof value !== 'string') return 'must be a string';
  return value === '' || (value.length <= 63 && QUALIFIED_NAME_PART.test(value))
    ? undefined
    : 'must be 63 characters or less, begin and end with an alphanumeric character, and contain only [-A-Za-z0-9_.]';
}

function stringMapCauses(map: unknown, field: string, valueProblem: (v: unknown) => string | undefined): StatusCause[] {
  if (map === undefined) return [];
  if (!isPlainObject(map)) return [{ reason: 'FieldValueInvalid', field, message: 'must be a map of strings' }];
  return Object.entries(map).flatMap(([key, value]) => {
    const problem = qualifiedNameProblem(key) ?? valueProblem(value);
    return problem === undefined ? [] : [{ reason: 'FieldValueInvalid', field: `${field}[${key}]`, message: problem }];
  });
}

export function validateObject(type: ResourceType, object: KubeObject): StatusCause[] {
  const { metadata } = object;
  const causes: StatusCause[] = [];
  const name = metadata.name ?? '';
  const problem = nameProblem(type, name);
  if (problem !== undefined) causes.push({ reason: 'FieldValueInvalid', field: 'metadata.name', message: problem });
  causes.push(...stringMapCauses(metadata.labels, 'metadata.labels', labelValueProblem));
  causes.push(
    ...stringMapCauses(metadata.annotations, 'metadata.annotations', (v) =>
      typeof v === 'string' ? undefined : 'must be a string',
    ),
  );
  for (const finalizer of metadata.finalizers ?? []) {
    const finalizerProblem = qualifiedNameProblem(finalizer);
    if (finalizerProblem !== undefined && finalizer !== 'kubernetes') {
      causes.push({ reason: 'FieldValueInvalid', field: 'metadata.finalizers', message: finalizerProblem });
    }
  }
  return causes;
}

export function validateUpdate(previous: KubeObject, next: KubeObject): StatusCause[] {
  if (previous.metadata.deletionTimestamp === undefined) return [];
  const before = new Set(previous.metadata.finalizers ?? []);
  const added = (next.metadata.finalizers ?? []).filter((f) => !before.has(f));
  return added.length === 0
    ? []
    : [
        {
          reason: 'FieldValueForbidden',
          field: 'metadata.finalizers',
          message:
            'no new finalizers can be added if the object is being deleted, ' +
            `found new finalizers ${JSON.stringify(added)}`,
        },
      ];
}
