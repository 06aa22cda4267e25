// Kubernetes' RBAC authorizer, for the fake API server's `rbac` option: a request made with a token the test
// declared (`server.tokens`) is allowed only when a Role or ClusterRole bound to its user (by a RoleBinding in
// the request's namespace, or a ClusterRoleBinding) allows its verb, group, resource and name — read from the
// RBAC objects stored in the server, as they are when the request arrives. A refusal is the real server's 403
// and message. Writes of bindings also pass RBAC's escalation check: `bind` on the role they name, or holding
// everything it grants there. Not modelled: aggregation, non-resource URL rules (every non-resource URL is
// allowed, as system:discovery and system:public-info-viewer allow them to authenticated users), impersonation.
import type { RbacV1Subject, V1PolicyRule, V1RoleBinding } from '@kubernetes/client-node';
import { parse as parseYaml } from 'yaml';
import { allows, requestAttributes, rightsOf, type RequestAttributes } from '../chart/rbac.ts';
import type { TokenIdentity } from './auth-reviews.ts';
import { resourceKey } from './resources.ts';
import { KubeError } from './status.ts';
import type { ObjectStore } from './store.ts';
import type { KubeObject } from './types.ts';

const RBAC_GROUP = 'rbac.authorization.k8s.io';
const BINDING_KEYS = { roles: `roles.${RBAC_GROUP}`, clusterRoles: `clusterroles.${RBAC_GROUP}`, roleBindings: `rolebindings.${RBAC_GROUP}`, clusterRoleBindings: `clusterrolebindings.${RBAC_GROUP}` };

export interface AuthorizedRequest {
  method: string;
  path: string;
  watch: boolean;
  contentType: string;
  body: Buffer;
}

export class RbacAuthorizer {
  readonly #store: ObjectStore;

  constructor(store: ObjectStore) {
    this.#store = store;
  }

  /** Throws the API server's 403 when the user may not make the request. */
  authorize(user: TokenIdentity, request: AuthorizedRequest): void {
    let attributes: RequestAttributes[];
    try {
      attributes = requestAttributes({ method: request.method, path: request.path, watch: request.watch, contentType: request.contentType });
    } catch {
      return; // a non-resource URL (OpenAPI and the like): allowed to every authenticated user
    }
    const [first, ...alsoCreate] = attributes;
    if (first === undefined) return;
    this.#check(user, first);
    // Server-side apply is a patch, and also a create when the object does not exist yet.
    if (alsoCreate.length > 0 && !this.#exists(first)) this.#check(user, alsoCreate[0]!);
    if ((first.resource === 'rolebindings' || first.resource === 'clusterrolebindings') && ['create', 'update', 'patch'].includes(first.verb)) {
      this.#checkEscalation(user, first, request.body);
    }
  }

  #check(user: TokenIdentity, request: RequestAttributes): void {
    if (allows(this.#rulesFor(user, request.namespace), request)) return;
    const key = resourceKey({ group: request.apiGroup, plural: request.resource.split('/')[0]! });
    const where = request.namespace === undefined ? 'at the cluster scope' : `in the namespace "${request.namespace}"`;
    throw new KubeError(
      403,
      'Forbidden',
      `${key}${request.name === undefined ? '' : ` "${request.name}"`} is forbidden: User "${user.username}" cannot ${request.verb} resource "${request.resource}" in API group "${request.apiGroup}" ${where}`,
      { ...(request.name === undefined ? {} : { name: request.name }), group: request.apiGroup, kind: request.resource.split('/')[0] },
    );
  }

  /** RBAC's escalation check: a binding may name a role only when its writer may `bind` it, or holds all it grants where it binds. */
  #checkEscalation(user: TokenIdentity, request: RequestAttributes, body: Buffer): void {
    const binding = parseBody(body);
    const roleRef = binding?.roleRef;
    if (roleRef === undefined) return;
    const bind: RequestAttributes = { verb: 'bind', apiGroup: RBAC_GROUP, resource: roleRef.kind === 'Role' ? 'roles' : 'clusterroles', namespace: request.namespace, name: roleRef.name };
    const held = this.#rulesFor(user, request.namespace);
    if (allows(held, bind)) return;
    const granted = roleRef.kind === 'Role' ? this.#roleRules('Role', roleRef.name, request.namespace) : this.#roleRules('ClusterRole', roleRef.name, undefined);
    const missing = rightsOf(granted).filter((right) => !allows(held, { verb: right.verb, apiGroup: right.apiGroup, resource: right.resource, namespace: request.namespace, name: right.names?.[0] }));
    if (missing.length === 0) return;
    throw new KubeError(
      403,
      'Forbidden',
      `${request.resource}.${RBAC_GROUP} "${request.name ?? binding?.metadata?.name ?? ''}" is forbidden: user "${user.username}" (groups=${JSON.stringify(user.groups ?? [])}) is attempting to grant RBAC permissions not currently held`,
    );
  }

  /** Every rule that holds for the user in `namespace` (cluster-wide ones only, for a request of no namespace). */
  #rulesFor(user: TokenIdentity, namespace: string | undefined): V1PolicyRule[] {
    const bindings = this.#store.list(BINDING_KEYS.clusterRoleBindings) as (V1RoleBinding & KubeObject)[];
    const rules = bindings.filter((binding) => boundTo(binding.subjects, user)).flatMap((binding) => this.#roleRules('ClusterRole', binding.roleRef.name, undefined));
    if (namespace === undefined) return rules;
    const local = this.#store.list(BINDING_KEYS.roleBindings, namespace) as (V1RoleBinding & KubeObject)[];
    return [...rules, ...local.filter((binding) => boundTo(binding.subjects, user)).flatMap((binding) => this.#roleRules(binding.roleRef.kind === 'Role' ? 'Role' : 'ClusterRole', binding.roleRef.name, namespace))];
  }

  #roleRules(kind: 'Role' | 'ClusterRole', name: string, namespace: string | undefined): V1PolicyRule[] {
    const role = kind === 'Role' ? this.#store.get(BINDING_KEYS.roles, namespace, name) : this.#store.get(BINDING_KEYS.clusterRoles, undefined, name);
    return ((role as { rules?: V1PolicyRule[] } | undefined)?.rules ?? []);
  }

  #exists(request: RequestAttributes): boolean {
    if (request.name === undefined) return false;
    return this.#store.get(resourceKey({ group: request.apiGroup, plural: request.resource.split('/')[0]! }), request.namespace, request.name) !== undefined;
  }
}

/** Whether a subject of the binding is the user: its ServiceAccount, its name, or one of its groups. */
function boundTo(subjects: RbacV1Subject[] | undefined, user: TokenIdentity): boolean {
  return (subjects ?? []).some((subject) => {
    switch (subject.kind) {
      case 'ServiceAccount':
        return user.username === `system:serviceaccount:${subject.namespace}:${subject.name}`;
      case 'User':
        return user.username === subject.name;
      case 'Group':
        return (user.groups ?? []).includes(subject.name);
      default:
        return false;
    }
  });
}

function parseBody(body: Buffer): Partial<V1RoleBinding> | undefined {
  if (body.length === 0) return undefined;
  try {
    // JSON, or YAML (server-side apply may send either).
    return parseYaml(body.toString('utf8')) as Partial<V1RoleBinding>;
  } catch {
    return undefined;
  }
}
