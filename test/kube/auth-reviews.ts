// TokenReview and SubjectAccessReview, answered from what the test declares: tokens it issued
// (`tokens.set(token, identity)`) and access it granted (`allow(rule)`). Nothing else is authenticated
// or allowed. The server's RBAC objects (roles, bindings) are stored but never consulted. As the real server,
// a review that names no audience asks for the API server's own, and a request to the server itself with a
// known token for other audiences only is refused 401 (`refusesAsCredential`).

import { isPlainObject } from './types.ts';
import { KubeError } from './status.ts';

export interface TokenIdentity {
  username: string;
  uid?: string;
  groups?: string[];
  extra?: Record<string, string[]>;
  /** Audiences the token is valid for; when set, a review asking for other audiences fails. */
  audiences?: string[];
  /** A token of the TokenRequest API: not authenticated once this ServiceAccount is gone (token-requests.ts). */
  boundTo?: { namespace: string; name: string; uid: string };
  /** A token bound to a pod: not authenticated once this pod is gone (or replaced: another uid). */
  boundPod?: { namespace: string; name: string; uid: string };
  /** Epoch ms after which the token is not authenticated. */
  expiresAtMs?: number;
}

/** A grant; an omitted field (or `*`) matches anything. `group` is the API group, `userGroup` the user's. */
export interface AccessRule {
  user?: string;
  userGroup?: string;
  verb?: string;
  group?: string;
  resource?: string;
  subresource?: string;
  namespace?: string;
  name?: string;
}

/** What the fake API server's tokens are for when no audience is asked: the real server's default. */
export const API_SERVER_AUDIENCE = 'https://kubernetes.default.svc.cluster.local';

export const TOKEN_REVIEWS_KEY = 'tokenreviews.authentication.k8s.io';
export const SUBJECT_ACCESS_REVIEWS_KEY = 'subjectaccessreviews.authorization.k8s.io';

interface ResourceAttributes {
  verb?: string;
  group?: string;
  resource?: string;
  subresource?: string;
  namespace?: string;
  name?: string;
}

function invalidReview(kind: string, message: string): KubeError {
  return new KubeError(422, 'Invalid', `${kind} is invalid: ${message}`);
}

function specOf(body: unknown, kind: string): Record<string, unknown> {
  if (!isPlainObject(body) || !isPlainObject(body.spec)) throw invalidReview(kind, 'spec is required');
  return body.spec;
}

function matches(ruleValue: string | undefined, actual: string | undefined): boolean {
  return ruleValue === undefined || ruleValue === '*' || ruleValue === (actual ?? '');
}

export class AuthReviews {
  readonly tokens = new Map<string, TokenIdentity>();
  /** The uid of a live ServiceAccount, for bound tokens; set by the server over its store. */
  serviceAccountUid: (namespace: string, name: string) => string | undefined = () => undefined;
  /** The uid of a live pod, for tokens bound to one; set by the server over its store. */
  podUid: (namespace: string, name: string) => string | undefined = () => undefined;
  private readonly rules: AccessRule[] = [];

  allow(rule: AccessRule): void {
    this.rules.push({ ...rule });
  }

  /** The answer to a review POSTed to the resource `key`, or undefined if `key` is not a review. */
  answer(key: string, body: unknown): object | undefined {
    if (key === TOKEN_REVIEWS_KEY) return this.tokenReview(body);
    if (key === SUBJECT_ACCESS_REVIEWS_KEY) return this.subjectAccessReview(body);
    return undefined;
  }

  private tokenReview(body: unknown): object {
    const spec = specOf(body, 'TokenReview');
    if (typeof spec.token !== 'string' || spec.token === '') {
      throw invalidReview('TokenReview', 'spec.token is required');
    }
    const asked = Array.isArray(spec.audiences) ? spec.audiences.map(String) : [];
    const identity = this.tokens.get(spec.token);
    // No audience asked: the API server's (only tokens whose audiences the test declared are held to it).
    const wanted = asked.length === 0 && identity?.audiences !== undefined ? [API_SERVER_AUDIENCE] : asked;
    const audiences = identity?.audiences === undefined || wanted.length === 0
      ? wanted
      : wanted.filter((audience) => identity.audiences!.includes(audience));
    let status: object;
    if (identity === undefined) {
      status = { authenticated: false, user: {}, error: 'token not recognised (not issued by the test)' };
    } else if (identity.expiresAtMs !== undefined && Date.now() >= identity.expiresAtMs) {
      status = { authenticated: false, user: {}, error: 'token has expired' };
    } else if (identity.boundTo !== undefined && this.serviceAccountUid(identity.boundTo.namespace, identity.boundTo.name) !== identity.boundTo.uid) {
      status = { authenticated: false, user: {}, error: `service account ${identity.boundTo.namespace}/${identity.boundTo.name} has been deleted` };
    } else if (identity.boundPod !== undefined && this.podUid(identity.boundPod.namespace, identity.boundPod.name) !== identity.boundPod.uid) {
      status = { authenticated: false, user: {}, error: `pod ${identity.boundPod.namespace}/${identity.boundPod.name} has been deleted` };
    } else if (wanted.length > 0 && audiences.length === 0) {
      const error = `token audiences ${JSON.stringify(identity.audiences)} do not include ${JSON.stringify(wanted)}`;
      status = { authenticated: false, user: {}, error };
    } else {
      const { audiences: _tokenAudiences, boundTo: _boundTo, boundPod: _boundPod, expiresAtMs: _expiresAtMs, ...user } = identity;
      status = { authenticated: true, user: { groups: [], ...user }, audiences };
    }
    return { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', metadata: {}, spec, status };
  }

  /**
   * Why the server itself refuses `token` as a request's credential, or undefined when it takes it: a token the
   * test declared with audiences is taken only while it is valid for the API server's audience. Other tokens (or
   * none) are taken, as ever: the server does not authenticate its callers.
   */
  refusesAsCredential(token: string | undefined): string | undefined {
    const identity = token === undefined ? undefined : this.tokens.get(token);
    if (identity?.audiences === undefined || identity.audiences.includes(API_SERVER_AUDIENCE)) return undefined;
    return `the token's audiences ${JSON.stringify(identity.audiences)} do not include the API server's (${API_SERVER_AUDIENCE})`;
  }

  private subjectAccessReview(body: unknown): object {
    const spec = specOf(body, 'SubjectAccessReview');
    const user = typeof spec.user === 'string' ? spec.user : undefined;
    const groups = Array.isArray(spec.groups) ? spec.groups.map(String) : [];
    if (user === undefined && groups.length === 0) {
      throw invalidReview('SubjectAccessReview', 'at least one of user or group must be specified');
    }
    const review = (status: object): object => ({
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      metadata: {},
      spec,
      status,
    });
    if (!isPlainObject(spec.resourceAttributes)) {
      return review({ allowed: false, reason: 'only resourceAttributes are answered by the fake API server' });
    }
    const attributes = spec.resourceAttributes as ResourceAttributes;
    const granted = this.rules.find(
      (rule) =>
        matches(rule.user, user) &&
        (rule.userGroup === undefined || rule.userGroup === '*' || groups.includes(rule.userGroup)) &&
        matches(rule.verb, attributes.verb) &&
        matches(rule.group, attributes.group) &&
        matches(rule.resource, attributes.resource) &&
        matches(rule.subresource, attributes.subresource) &&
        matches(rule.namespace, attributes.namespace) &&
        matches(rule.name, attributes.name),
    );
    return granted === undefined
      ? review({ allowed: false, reason: 'no rule set by the test allows this' })
      : review({ allowed: true, reason: `allowed by the test rule ${JSON.stringify(granted)}` });
  }
}
