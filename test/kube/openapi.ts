// OpenAPI documents of the served kinds, which kubectl's client-side validation (v2) and `kubectl explain`
// (v3, v2 before kubectl 1.27) read: each custom kind from its CRD version's openAPIV3Schema (for v2
// without what v2 cannot say — defaults, nullable, CEL rules, oneOf/anyOf/not — as the real server publishes
// it), each built-in kind as its top-level fields with their content left open (any value validates),
// and the ObjectMeta they all reference. v3 documents have one path per kind, its `get` (kubectl explain finds
// a resource's kind there); no path has a `patch` with the fieldValidation parameter, so kubectl checks
// manifests itself (with v2) rather than asking for server-side field validation, which the fake does not do.

import { apiVersionOf, type JsonSchema, type ResourceRegistry, type ResourceType } from './resources.ts';
import { isPlainObject } from './types.ts';

const OBJECT_META = 'io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta';
const INFO = { title: 'Kubernetes', version: 'v1.33.0-runlet-fake' };

/** The top-level fields of the built-in kinds besides apiVersion, kind and metadata. */
const BUILTIN_FIELDS: Record<string, string[]> = {
  ConfigMap: ['data', 'binaryData', 'immutable'],
  Secret: ['data', 'stringData', 'type', 'immutable'],
  ServiceAccount: ['secrets', 'imagePullSecrets', 'automountServiceAccountToken'],
  Event: [
    'involvedObject', 'reason', 'message', 'source', 'firstTimestamp', 'lastTimestamp', 'count', 'type', 'eventTime',
    'series', 'action', 'related', 'reportingComponent', 'reportingInstance',
  ],
  Role: ['rules'],
  ClusterRole: ['rules', 'aggregationRule'],
  RoleBinding: ['subjects', 'roleRef'],
  ClusterRoleBinding: ['subjects', 'roleRef'],
  Lease: ['spec'],
};
const SPEC_AND_STATUS = ['spec', 'status'];

const OBJECT_META_SCHEMA: JsonSchema = {
  description: 'ObjectMeta is metadata that all persisted resources must have.',
  type: 'object',
  properties: {
    ...Object.fromEntries(
      ['name', 'generateName', 'namespace', 'uid', 'resourceVersion', 'selfLink', 'creationTimestamp', 'deletionTimestamp']
        .map((field) => [field, { type: 'string' }]),
    ),
    generation: { type: 'integer', format: 'int64' },
    deletionGracePeriodSeconds: { type: 'integer', format: 'int64' },
    labels: { type: 'object', additionalProperties: { type: 'string' } },
    annotations: { type: 'object', additionalProperties: { type: 'string' } },
    finalizers: { type: 'array', items: { type: 'string' } },
    ownerReferences: { type: 'array', items: {} },
    managedFields: { type: 'array', items: {} },
  },
};

/** `io.k8s.api.apps.v1.Deployment`, `dev.runlet.v1alpha1.App`: the real server's definition names. */
export function definitionName(type: ResourceType): string {
  if (type.custom) return [...type.group.split('.').reverse(), type.version, type.kind].join('.');
  if (type.group === 'apiextensions.k8s.io') return `io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.${type.version}.${type.kind}`;
  const pkg = type.group === '' ? 'core' : type.group.split('.')[0];
  return `io.k8s.api.${pkg}.${type.version}.${type.kind}`;
}

function groupVersionKind(type: ResourceType): object[] {
  return [{ group: type.group, version: type.version, kind: type.kind }];
}

function builtinSchema(type: ResourceType): JsonSchema {
  const open = Object.fromEntries((BUILTIN_FIELDS[type.kind] ?? SPEC_AND_STATUS).map((field) => [field, {}]));
  return {
    description: `${type.kind} (the fake API server describes its top-level fields only).`,
    type: 'object',
    properties: { apiVersion: { type: 'string' }, kind: { type: 'string' }, metadata: {}, ...open },
  };
}

/** Keywords OpenAPI v2 has no room for, dropped as the real server drops them from CRD schemas. */
const NOT_IN_V2 = new Set(['default', 'nullable', 'x-kubernetes-validations', 'oneOf', 'anyOf', 'not', 'allOf']);

function toV2(schema: JsonSchema): JsonSchema {
  // Nodes that keep unknown fields or take ints and strings cannot be typed in v2: any value validates.
  if (schema['x-kubernetes-preserve-unknown-fields'] === true) return schema.description === undefined ? {} : { description: schema.description };
  const converted: JsonSchema = {};
  for (const [keyword, value] of Object.entries(schema)) {
    if (NOT_IN_V2.has(keyword)) continue;
    if (keyword === 'type' && (schema.nullable === true || schema['x-kubernetes-int-or-string'] === true)) continue;
    if (keyword === 'properties' && isPlainObject(value)) {
      converted.properties = Object.fromEntries(Object.entries(value as Record<string, JsonSchema>).map(([k, v]) => [k, toV2(v)]));
    } else if ((keyword === 'items' || keyword === 'additionalProperties') && isPlainObject(value)) {
      converted[keyword] = toV2(value as JsonSchema);
    } else {
      converted[keyword] = value;
    }
  }
  return converted;
}

/** A kind's definition, with metadata referencing ObjectMeta (`ref` renders the reference per version). */
function kindSchema(type: ResourceType, ref: (name: string) => JsonSchema, v2: boolean): JsonSchema {
  const base = type.schema === undefined ? builtinSchema(type) : v2 ? toV2(type.schema) : structuredClone(type.schema);
  return {
    ...base,
    type: 'object',
    properties: {
      ...base.properties,
      apiVersion: { type: 'string', description: 'APIVersion defines the versioned schema of this representation of an object.' },
      kind: { type: 'string', description: 'Kind is a string value representing the REST resource this object represents.' },
      metadata: { description: "Standard object's metadata.", ...ref(OBJECT_META) },
    },
    'x-kubernetes-group-version-kind': groupVersionKind(type),
  };
}

export interface OpenApiV2Document {
  swagger: string;
  info: { title: string; version: string };
  paths: Record<string, never>;
  definitions: Record<string, JsonSchema>;
}

/** `/openapi/v2` as JSON (openapi-protobuf.ts encodes it for kubectl): a definition per served kind and version. */
export function openApiV2(registry: ResourceRegistry): OpenApiV2Document {
  const ref = (name: string): JsonSchema => ({ $ref: `#/definitions/${name}` });
  const definitions: Record<string, JsonSchema> = { [OBJECT_META]: OBJECT_META_SCHEMA };
  for (const type of registry.all()) definitions[definitionName(type)] = kindSchema(type, ref, true);
  return { swagger: '2.0', info: INFO, paths: {}, definitions };
}

/** `api/v1`, `apis/apps/v1`: the keys of `/openapi/v3`'s index. */
export function openApiV3Path(type: Pick<ResourceType, 'group' | 'version'>): string {
  return type.group === '' ? `api/${type.version}` : `apis/${apiVersionOf(type)}`;
}

/** The path of a kind's object and its `get`, with the x-kubernetes-group-version-kind kubectl explain looks for. */
function getPath(type: ResourceType): [string, object] {
  const scope = type.namespaced ? '/namespaces/{namespace}' : '';
  const path = `/${openApiV3Path(type)}${scope}/${type.plural}/{name}`;
  const schema = { $ref: `#/components/schemas/${definitionName(type)}` };
  const get = {
    operationId: `read${type.kind}`,
    'x-kubernetes-action': 'get',
    'x-kubernetes-group-version-kind': { group: type.group, version: type.version, kind: type.kind },
    responses: { '200': { description: 'OK', content: { 'application/json': { schema } } } },
  };
  return [path, { get }];
}

export function openApiV3Index(registry: ResourceRegistry): object {
  const paths = [...new Set(registry.all().map(openApiV3Path))].sort();
  return { paths: Object.fromEntries(paths.map((path) => [path, { serverRelativeURL: `/openapi/v3/${path}` }])) };
}

/** One group version's document, undefined when no kind is served there. */
export function openApiV3GroupVersion(registry: ResourceRegistry, path: string): object | undefined {
  const types = registry.all().filter((type) => openApiV3Path(type) === path);
  if (types.length === 0) return undefined;
  const ref = (name: string): JsonSchema => ({ allOf: [{ $ref: `#/components/schemas/${name}` }] });
  const schemas: Record<string, JsonSchema> = { [OBJECT_META]: OBJECT_META_SCHEMA };
  for (const type of types) schemas[definitionName(type)] = kindSchema(type, ref, false);
  return { openapi: '3.0.0', info: INFO, paths: Object.fromEntries(types.map(getPath)), components: { schemas } };
}
