// Every problem the management API answers, declared once. Handlers and hooks throw
// `new ProblemError(ManagementProblems.x, detail)`; the plugin's one error handler renders it (routes.ts).
// Codes shared with the run interface (sidecar/errors.ts) mean the same thing there: one problem type URI, one
// meaning.
import type { ProblemSpec } from '../sidecar/problem.ts';

export const ManagementProblems = {
  invalidParameter: { code: 'invalid-parameter', status: 400, title: 'Invalid query parameter' },
  invalidPageToken: { code: 'invalid-page-token', status: 400, title: 'Invalid page token' },
  /** For the `authenticate` hook of cluster mode. */
  unauthorized: { code: 'unauthorized', status: 401, title: 'Authentication required' },
  /** For the `authenticate` hook of cluster mode. */
  forbidden: { code: 'forbidden', status: 403, title: 'Not allowed' },
  appNotFound: { code: 'app-not-found', status: 404, title: 'App not found' },
  runNotFound: { code: 'run-not-found', status: 404, title: 'Run not found' },
  routeNotFound: { code: 'route-not-found', status: 404, title: 'No such route' },
  methodNotAllowed: { code: 'method-not-allowed', status: 405, title: 'Method not allowed' },
  internalError: { code: 'internal-error', status: 500, title: 'Internal error' },
  /**
   * For the `authenticate` hook of cluster mode: the Kubernetes API could not review the token (TokenReview or
   * SubjectAccessReview failed), so the request is refused rather than let through unchecked.
   */
  authUnavailable: { code: 'auth-unavailable', status: 503, title: 'Authentication unavailable' },
  /**
   * For the `authenticate` hook of cluster mode: the token would need a review, and the reviews the API server is
   * asked for are at their bound (management/review-limiter.ts). 503, not 429: the bound is shared by every
   * caller, so this caller did not necessarily send too many requests; the server is busy.
   */
  authOverloaded: { code: 'auth-overloaded', status: 503, title: 'Authentication overloaded' },
} as const satisfies Record<string, ProblemSpec>;

/**
 * A client error raised outside the management API's own code — by fastify or by a hook of the host server (a
 * rate limiter's 429): its status is theirs, so the spec is made per status rather than listed above.
 */
export function requestRejectedProblem(status: number): ProblemSpec {
  return { code: 'request-rejected', status, title: 'Request rejected' };
}
