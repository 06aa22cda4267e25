// Just enough of Kubernetes RBAC to check the chart's roles: rules as the README tables state them, the
// attributes the API server authorizes a request by, and whether a set of rules allows them.
import type { V1PolicyRule } from '@kubernetes/client-node';

export type PolicyRule = V1PolicyRule;

/** What the authorizer sees of a request (k8s.io/apiserver's RequestInfo). */
export interface RequestAttributes {
  verb: string;
  apiGroup: string;
  /** `deployments`, or `apps/status` for a subresource. */
  resource: string;
  namespace: string | undefined;
  name: string | undefined;
}

/** A rule allows a request when group, resource, verb and (if it lists any) name all match. */
export function allows(rules: PolicyRule[], request: RequestAttributes): boolean {
  return rules.some(
    (rule) =>
      matches(rule.apiGroups ?? [], request.apiGroup) &&
      matches(rule.resources ?? [], request.resource) &&
      matches(rule.verbs, request.verb) &&
      (rule.resourceNames === undefined || rule.resourceNames.length === 0 || (request.name !== undefined && rule.resourceNames.includes(request.name))),
  );
}

function matches(allowed: string[], value: string): boolean {
  return allowed.includes('*') || allowed.includes(value);
}

/** Non-resource URLs every client may GET: Kubernetes' default ClusterRole system:public-info-viewer grants them. */
const PUBLIC_INFO_PATHS = new Set(['/version', '/healthz', '/livez', '/readyz']);
/** Discovery documents (`/api`, `/apis`, `/apis/<group>`, `/apis/<group>/<version>`): system:discovery grants them to every authenticated client. */
const DISCOVERY_PATH = /^\/(?:api|apis(?:\/[^/]+(?:\/[^/]+)?)?)$/;

/**
 * The authorizer's view of a logged API request (none for the public-info and discovery URLs, which need no grant of the chart): `/apis/apps/v1/namespaces/ns/deployments/name/status`
 * → patch apps deployments/status ns name. A server-side apply may create the object, so the API server
 * authorizes it as `patch` and, when the object is missing, also as `create`: both are returned.
 */
export function requestAttributes(request: { method: string; path: string; watch: boolean; contentType?: string | undefined }): RequestAttributes[] {
  if (request.method === 'GET' && (PUBLIC_INFO_PATHS.has(request.path) || DISCOVERY_PATH.test(request.path))) return [];
  const match = request.path.match(/^\/(?:api\/v1|apis\/([^/]+)\/[^/]+)(?:\/namespaces\/([^/]+))?\/([^/]+)(?:\/([^/]+))?(?:\/([^/]+))?$/);
  if (match === null) throw new Error(`not a resource path: ${request.method} ${request.path}`);
  const [, apiGroup = '', namespace, plural, name, subresource] = match;
  const resource = subresource === undefined ? plural! : `${plural}/${subresource}`;
  const verb = verbOf(request.method, name !== undefined, request.watch);
  const attributes = { apiGroup, resource, namespace: namespace === undefined ? undefined : decodeURIComponent(namespace), name: name === undefined ? undefined : decodeURIComponent(name) };
  const apply = request.method === 'PATCH' && request.contentType?.startsWith('application/apply-patch') === true;
  return apply ? [{ ...attributes, verb }, { ...attributes, verb: 'create' }] : [{ ...attributes, verb }];
}

function verbOf(method: string, named: boolean, watch: boolean): string {
  switch (method) {
    case 'GET':
      return watch ? 'watch' : named ? 'get' : 'list';
    case 'POST':
      return 'create';
    case 'PUT':
      return 'update';
    case 'PATCH':
      return 'patch';
    case 'DELETE':
      return named ? 'delete' : 'deletecollection';
    default:
      throw new Error(`no RBAC verb for the HTTP method ${method}`);
  }
}

export type TableRule = PolicyRule & {
  /** The Scope column: which role of the chart holds the rule. */
  scope: string;
  why: string;
};

/**
 * The rules of the first Markdown table under `heading`. Columns: Scope | API group | Resources | Names |
 * Verbs | Why; lists are comma-separated, backticks ignored; API group `core` is the core group (""),
 * Names `—` means any name.
 */
export function rulesFromTable(markdown: string, heading: string): TableRule[] {
  const lines = markdown.split('\n');
  const start = lines.findIndex((line) => line.trim() === heading);
  if (start === -1) throw new Error(`no heading "${heading}"`);
  const tableStart = lines.findIndex((line, index) => index > start && line.startsWith('|'));
  if (tableStart === -1) throw new Error(`no table under "${heading}"`);
  const rows: string[][] = [];
  for (let index = tableStart; index < lines.length && lines[index]!.startsWith('|'); index++) {
    rows.push(lines[index]!.slice(1, lines[index]!.trimEnd().length - 1).split('|').map((cell) => cell.trim()));
  }
  const [header, separator, ...body] = rows;
  const expected = ['Scope', 'API group', 'Resources', 'Names', 'Verbs', 'Why'];
  if (header?.join('|') !== expected.join('|') || separator === undefined) throw new Error(`the table under "${heading}" must have the columns ${expected.join(' | ')}`);
  return body.map((cells) => {
    const [scope, group, resources, names, verbs, why] = cells.map((cell) => cell.replaceAll('`', ''));
    const list = (cell: string) => cell.split(',').map((item) => item.trim());
    const resourceNames = names === '—' ? undefined : list(names!);
    return {
      scope: scope!,
      apiGroups: [group === 'core' ? '' : group!],
      resources: list(resources!),
      verbs: list(verbs!),
      ...(resourceNames === undefined ? {} : { resourceNames }),
      why: why!,
    };
  });
}

/** One right a rule grants: a verb on a resource of a group, limited to `names` when the rule lists any. */
export interface GrantedRight {
  verb: string;
  apiGroup: string;
  resource: string;
  names: string[] | undefined;
}

/** Every right of the rules, one per verb, group and resource. */
export function rightsOf(rules: PolicyRule[]): GrantedRight[] {
  return rules.flatMap((rule) =>
    (rule.apiGroups ?? []).flatMap((apiGroup) =>
      (rule.resources ?? []).flatMap((resource) => rule.verbs.map((verb) => ({ verb, apiGroup, resource, names: rule.resourceNames?.length ? rule.resourceNames : undefined }))),
    ),
  );
}

/** Whether the request is one the right allows. */
export function uses(right: GrantedRight, request: RequestAttributes): boolean {
  return allows([{ apiGroups: [right.apiGroup], resources: [right.resource], verbs: [right.verb], ...(right.names === undefined ? {} : { resourceNames: right.names }) }], request);
}

/** `verb group/resource [names]`, as a failure names a right. */
export function describeRight(right: GrantedRight): string {
  return `${right.verb} ${right.apiGroup === '' ? 'core' : right.apiGroup}/${right.resource}${right.names === undefined ? '' : ` [${right.names.join(', ')}]`}`;
}
