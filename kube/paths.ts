// The one way to name a place in the Kubernetes API: a KubePath, built from its segments — group, version,
// namespace, resource, name, subresource — each percent-encoded here, and none of them empty, `.` or `..`.
// kube/'s client takes nothing else, so no caller can build a path by joining strings: a name that holds
// `../../team-b/…` stays one segment, the name of no object, and never walks to another namespace's objects.
//
//   const accounts = KubePath.of({ version: 'v1', namespace, resource: 'serviceaccounts' });
//   api.get(accounts.named(name));                  // /api/v1/namespaces/<ns>/serviceaccounts/<name>
//   api.create(accounts.named(name).subresource('token'), request);

/** Where a resource, a collection or an object lives. */
export interface ResourcePathParts {
  /** The API group; absent or '' for the core group (`/api/v1`). */
  group?: string;
  version: string;
  /** Absent for cluster-scoped resources, and for a namespaced resource across all namespaces. */
  namespace?: string;
  /** The plural: `deployments`. */
  resource: string;
  name?: string;
  /** `status`, `scale`, `token`. Needs a name. */
  subresource?: string;
}

/** The path of a resource, or of one of the few other places callers ask (/version, a group's discovery, the issuer's keys). */
export class KubePath {
  /** The resource this path names; null for the others. */
  readonly parts: Readonly<ResourcePathParts> | null;
  readonly #text: string;

  private constructor(text: string, parts: Readonly<ResourcePathParts> | null) {
    this.#text = text;
    this.parts = parts;
  }

  static of(parts: ResourcePathParts): KubePath {
    const { group, version, namespace, resource, name, subresource } = parts;
    if (subresource !== undefined && name === undefined) throw new Error(`a Kubernetes API path with subresource ${subresource} needs a name`);
    const root = group === undefined || group === '' ? `/api/${segment('version', version)}` : `/apis/${segment('group', group)}/${segment('version', version)}`;
    const scope = namespace === undefined ? '' : `/namespaces/${segment('namespace', namespace)}`;
    const object = name === undefined ? '' : `/${segment('name', name)}`;
    const sub = subresource === undefined ? '' : `/${segment('subresource', subresource)}`;
    return new KubePath(`${root}${scope}/${segment('resource', resource)}${object}${sub}`, Object.freeze({ ...parts }));
  }

  /** `/apis/{group}`: the group's discovery document. */
  static group(group: string): KubePath {
    return new KubePath(`/apis/${segment('group', group)}`, null);
  }

  /** `/version`. */
  static readonly version = new KubePath('/version', null);

  /** The service-account issuer's OpenID discovery document (ServiceAccountIssuerDiscovery, from 1.20). */
  static readonly openIdConfiguration = new KubePath('/.well-known/openid-configuration', null);

  /** The service-account issuer's key set, as the API server serves it (whatever jwks_uri the discovery names). */
  static readonly openIdKeySet = new KubePath('/openid/v1/jwks', null);

  /** The object `name` of this collection. */
  named(name: string): KubePath {
    const parts = this.#resourceParts('named');
    if (parts.name !== undefined) throw new Error(`${this.#text} names an object already; it has no object ${JSON.stringify(name)}`);
    return KubePath.of({ ...parts, name });
  }

  /** This object's `subresource`. */
  subresource(subresource: string): KubePath {
    const parts = this.#resourceParts('subresource');
    if (parts.subresource !== undefined) throw new Error(`${this.#text} is a subresource already`);
    return KubePath.of({ ...parts, subresource });
  }

  toString(): string {
    return this.#text;
  }

  /** As text in logs. */
  toJSON(): string {
    return this.#text;
  }

  #resourceParts(what: string): Readonly<ResourcePathParts> {
    if (this.parts === null) throw new Error(`${this.#text} is not a resource path; ${what} needs one`);
    return this.parts;
  }
}

/** One segment, encoded; a value that could not name one is refused rather than sent. */
function segment(what: string, value: string): string {
  if (typeof value !== 'string' || value === '' || value === '.' || value === '..') {
    throw new Error(`a Kubernetes API path cannot have ${JSON.stringify(value)} as its ${what}`);
  }
  return encodeURIComponent(value);
}
