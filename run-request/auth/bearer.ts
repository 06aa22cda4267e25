// The HTTP side of bearer authentication (RFC 6750): reading the token out of `Authorization`, and the 401 / 403
// answers with their `WWW-Authenticate` challenge.
import { ProblemError } from '../../crds/problem.ts';
import { Problems } from '../../crds/problems.ts';

const REALM = 'runlet';

/** RFC 7235 token68 with the JWS compact shape: three base64url parts separated by dots. */
const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;
const BEARER_SCHEME = /^bearer$/i;

/** The JWT of an `Authorization: Bearer <JWT>` value; throws the 401 to answer when there is none. */
export function bearerToken(authorization: string | undefined): string {
  if (authorization === undefined || authorization.trim() === '') {
    throw missingCredentials('The run interface requires an Authorization: Bearer <token> header');
  }
  const value = authorization.trim();
  const space = value.indexOf(' ');
  const scheme = space === -1 ? value : value.slice(0, space);
  if (!BEARER_SCHEME.test(scheme)) {
    throw missingCredentials('The Authorization header must use the Bearer scheme (Authorization: Bearer <token>)');
  }
  const token = space === -1 ? '' : value.slice(space + 1).trimStart();
  if (!COMPACT_JWS.test(token)) {
    throw invalidToken('The bearer token is not a JWT (three base64url parts separated by dots)');
  }
  return token;
}

/**
 * 401 for a request without usable credentials: no header, or another scheme. RFC 6750 §3.1: no error code then,
 * only the challenge.
 */
function missingCredentials(detail: string): ProblemError {
  return new ProblemError(Problems.unauthorized, detail, { headers: { 'www-authenticate': `Bearer realm="${REALM}"` } });
}

/** 401 for a token that is malformed, expired, not for us, or fails its signature. */
export function invalidToken(detail: string, cause?: unknown): ProblemError {
  const challenge = `Bearer realm="${REALM}", error="invalid_token", error_description="${quotable(detail)}"`;
  return new ProblemError(Problems.unauthorized, detail, { headers: { 'www-authenticate': challenge }, cause });
}

/** 403 for a valid token of another project. */
export function otherProject(tokenProjectId: string, projectId: string): ProblemError {
  return new ProblemError(Problems.forbidden, `The token is for project "${tokenProjectId}", not for "${projectId}"`);
}

/** RFC 6750 §3: error_description admits printable ASCII except `"` and `\`. */
function quotable(text: string): string {
  return text.replace(/["\\]/g, "'").replace(/[^\x20-\x7e]/g, '?');
}
