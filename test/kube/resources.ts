// The kinds the fake API server serves: one table of built-ins, plus the kinds CustomResourceDefinitions
// add while the server runs. Everything else (routing, discovery, storage keys) is derived from it.

export interface ResourceType {
  readonly group: string;
  readonly version: string;
  readonly kind: string;
  /** The URL segment: `deployments`. */
  readonly plural: string;
  readonly singular: string;
  readonly namespaced: boolean;
  /** Served with a `/status` subresource: main-resource writes then leave `status` untouched. */
  readonly hasStatus: boolean;
  readonly verbs: readonly string[];
  /** Served because a CRD declares it (items of lists carry apiVersion/kind, as for real custom resources). */
  readonly custom: boolean;
  /** Discovery's short names (`kubectl get cm`) and categories (`kubectl get all`). */
  readonly shortNames: readonly string[];
  readonly categories: readonly string[];
  /** A CRD version's `openAPIV3Schema` (pruning, defaulting, OpenAPI documents); none for built-ins. */
  readonly schema?: JsonSchema;
  /** A CRD version's `additionalPrinterColumns`, for Table responses. */
  readonly printerColumns?: readonly PrinterColumn[];
}

/** An OpenAPI v3 schema as CRDs write it (structural: every node typed, or preserving unknown fields). */
export interface JsonSchema {
  type?: string;
  description?: string;
  properties?: Record<string, JsonSchema>;
  items?: JsonSchema;
  additionalProperties?: JsonSchema | boolean;
  default?: unknown;
  'x-kubernetes-preserve-unknown-fields'?: boolean;
  [keyword: string]: unknown;
}

export interface PrinterColumn {
  name: string;
  type: string;
  jsonPath: string;
  format?: string;
  description?: string;
  priority?: number;
}

const OBJECT_VERBS = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];
const REVIEW_VERBS = ['create'];

type Row = [group: string, version: string, kind: string, plural: string, namespaced: boolean, hasStatus: boolean];

const BUILTIN_ROWS: Row[] = [
  ['', 'v1', 'Namespace', 'namespaces', false, true],
  ['', 'v1', 'Node', 'nodes', false, true],
  ['', 'v1', 'ConfigMap', 'configmaps', true, false],
  ['', 'v1', 'Secret', 'secrets', true, false],
  ['', 'v1', 'Service', 'services', true, true],
  ['', 'v1', 'Endpoints', 'endpoints', true, false],
  ['discovery.k8s.io', 'v1', 'EndpointSlice', 'endpointslices', true, false],
  ['', 'v1', 'ServiceAccount', 'serviceaccounts', true, false],
  ['', 'v1', 'Pod', 'pods', true, true],
  ['', 'v1', 'Event', 'events', true, false],
  ['apps', 'v1', 'Deployment', 'deployments', true, true],
  ['apps', 'v1', 'ReplicaSet', 'replicasets', true, true],
  ['networking.k8s.io', 'v1', 'Ingress', 'ingresses', true, true],
  ['networking.k8s.io', 'v1', 'NetworkPolicy', 'networkpolicies', true, false],
  ['rbac.authorization.k8s.io', 'v1', 'Role', 'roles', true, false],
  ['rbac.authorization.k8s.io', 'v1', 'RoleBinding', 'rolebindings', true, false],
  ['rbac.authorization.k8s.io', 'v1', 'ClusterRole', 'clusterroles', false, false],
  ['rbac.authorization.k8s.io', 'v1', 'ClusterRoleBinding', 'clusterrolebindings', false, false],
  ['coordination.k8s.io', 'v1', 'Lease', 'leases', true, false],
  ['apiextensions.k8s.io', 'v1', 'CustomResourceDefinition', 'customresourcedefinitions', false, true],
];

/** Create-only kinds that are answered, never stored (see auth-reviews.ts). */
const REVIEW_ROWS: Row[] = [
  ['authentication.k8s.io', 'v1', 'TokenReview', 'tokenreviews', false, false],
  ['authorization.k8s.io', 'v1', 'SubjectAccessReview', 'subjectaccessreviews', false, false],
];

/** The real server's short names and categories of the built-in kinds. */
const BUILTIN_NAMES: Record<string, { shortNames?: string[]; categories?: string[] }> = {
  namespaces: { shortNames: ['ns'] },
  nodes: { shortNames: ['no'] },
  configmaps: { shortNames: ['cm'] },
  services: { shortNames: ['svc'], categories: ['all'] },
  serviceaccounts: { shortNames: ['sa'] },
  pods: { shortNames: ['po'], categories: ['all'] },
  events: { shortNames: ['ev'] },
  deployments: { shortNames: ['deploy'], categories: ['all'] },
  replicasets: { shortNames: ['rs'], categories: ['all'] },
  ingresses: { shortNames: ['ing'] },
  networkpolicies: { shortNames: ['netpol'] },
  customresourcedefinitions: { shortNames: ['crd', 'crds'], categories: ['api-extensions'] },
};

function fromRow([group, version, kind, plural, namespaced, hasStatus]: Row, verbs: readonly string[]): ResourceType {
  const { shortNames = [], categories = [] } = BUILTIN_NAMES[plural] ?? {};
  const singular = kind.toLowerCase();
  return { group, version, kind, plural, singular, namespaced, hasStatus, verbs, custom: false, shortNames, categories };
}

export const BUILTIN_RESOURCES: readonly ResourceType[] = [
  ...BUILTIN_ROWS.map((row) => fromRow(row, OBJECT_VERBS)),
  ...REVIEW_ROWS.map((row) => fromRow(row, REVIEW_VERBS)),
];

export function customResourceType(fields: Omit<ResourceType, 'verbs' | 'custom'>): ResourceType {
  return { ...fields, verbs: OBJECT_VERBS, custom: true };
}

export function apiVersionOf(type: Pick<ResourceType, 'group' | 'version'>): string {
  return type.group === '' ? type.version : `${type.group}/${type.version}`;
}

/**
 * `deployments.apps`, `configmaps`: how the API server names a resource in messages, and the key objects
 * are stored under — all versions of a kind share one storage (the fake does no version conversion).
 */
export function resourceKey(type: Pick<ResourceType, 'group' | 'plural'>): string {
  return type.group === '' ? type.plural : `${type.plural}.${type.group}`;
}

export class ResourceRegistry {
  private readonly builtins: readonly ResourceType[];
  /** Custom kinds by the name of the CRD that declares them. */
  private readonly custom = new Map<string, readonly ResourceType[]>();

  constructor(builtins: readonly ResourceType[] = BUILTIN_RESOURCES) {
    this.builtins = builtins;
  }

  all(): ResourceType[] {
    return [...this.builtins, ...[...this.custom.values()].flat()];
  }

  find(group: string, version: string, plural: string): ResourceType | undefined {
    return this.all().find((t) => t.group === group && t.version === version && t.plural === plural);
  }

  /** Any served version of the kind stored under `key`; the first one declared wins. */
  forKey(key: string): ResourceType | undefined {
    return this.all().find((t) => resourceKey(t) === key);
  }

  isBuiltin(group: string, plural: string): boolean {
    return this.builtins.some((t) => t.group === group && t.plural === plural);
  }

  setCustom(crdName: string, types: readonly ResourceType[]): void {
    this.custom.set(crdName, types);
  }

  removeCustom(crdName: string): void {
    this.custom.delete(crdName);
  }
}
