// Every problem type Runlet answers — run interface, management API and Python runtime alike — declared once:
// one code, one status, one title, whichever component answers it. Handlers throw
// `new ProblemError(Problems.x, detail)`. Each type is documented under its code in docs/problems.md, where its
// type URI leads; the Python runtime reads runtime/python/runlet_runtime/problem_types.py, generated from this
// list by `npm run problems` (crds/generate-problems.ts). test/contract/problems.test.ts fails when the doc or the
// generated file is out of step with this list.
//
// A TypeScript module rather than a JSON file: the TypeScript side gets typed keys (`Problems.timeout` is checked
// at compile time) with no loader, and the one consumer that cannot import TypeScript, the stdlib-only runtime
// that ships alone in its image, gets a generated Python module rather than reading a file at start-up.
//
// To add a problem type: one line here (key: the code in camelCase), a section in docs/problems.md, then
// `npm run problems`.
import type { ProblemSpec } from './problem.ts';

export const Problems = {
  invalidJson: { code: 'invalid-json', status: 400, title: 'Request body is not valid JSON' },
  bodyNotObject: { code: 'body-not-object', status: 400, title: 'Request body is not a JSON object' },
  jsonTooComplex: { code: 'json-too-complex', status: 400, title: 'Request body JSON is too complex' },
  invalidParameter: { code: 'invalid-parameter', status: 400, title: 'Invalid query parameter' },
  invalidHeader: { code: 'invalid-header', status: 400, title: 'Invalid request header' },
  invalidWebhookEndpoint: { code: 'invalid-webhook-endpoint', status: 400, title: 'Invalid webhookEndpoint' },
  invalidPageToken: { code: 'invalid-page-token', status: 400, title: 'Invalid page token' },
  malformedRequest: { code: 'malformed-request', status: 400, title: 'Malformed request' },
  requestRejected: { code: 'request-rejected', status: 400, title: 'Request rejected' },
  unauthorized: { code: 'unauthorized', status: 401, title: 'Authentication required' },
  forbidden: { code: 'forbidden', status: 403, title: 'Not allowed' },
  heldBodyMismatch: { code: 'held-body-mismatch', status: 403, title: 'Body is not the one the hand-over was signed for' },
  appNotFound: { code: 'app-not-found', status: 404, title: 'App not found' },
  functionNotFound: { code: 'function-not-found', status: 404, title: 'Function not found' },
  routeNotFound: { code: 'route-not-found', status: 404, title: 'No such route' },
  runNotFound: { code: 'run-not-found', status: 404, title: 'Run not found' },
  keyNotFound: { code: 'key-not-found', status: 404, title: 'API key not found' },
  methodNotAllowed: { code: 'method-not-allowed', status: 405, title: 'Method not allowed' },
  heldRunTaken: { code: 'held-run-taken', status: 409, title: 'Held run already taken' },
  runCancelled: { code: 'run-cancelled', status: 409, title: 'Run cancelled' },
  runFinished: { code: 'run-finished', status: 409, title: 'Run already finished' },
  keyExists: { code: 'key-exists', status: 409, title: 'API key already exists' },
  requestTimeout: { code: 'request-timeout', status: 408, title: 'Request did not arrive in time' },
  lengthRequired: { code: 'length-required', status: 411, title: 'Length required' },
  bodyTooLarge: { code: 'body-too-large', status: 413, title: 'Request body too large' },
  invalidArguments: { code: 'invalid-arguments', status: 422, title: 'Arguments do not match the function' },
  headersTooLarge: { code: 'headers-too-large', status: 431, title: 'Request headers too large' },
  internalError: { code: 'internal-error', status: 500, title: 'Internal error' },
  upstreamFailed: { code: 'upstream-failed', status: 502, title: "The app's runtime failed to answer" },
  resultTooLarge: { code: 'result-too-large', status: 502, title: "The function's result is over the limit" },
  appUnavailable: { code: 'app-unavailable', status: 503, title: 'App not ready' },
  requestBufferFull: { code: 'request-buffer-full', status: 503, title: 'Too many requests arriving at once' },
  overCapacity: { code: 'over-capacity', status: 503, title: 'App at capacity' },
  draining: { code: 'draining', status: 503, title: 'Replica is shutting down' },
  coldStartTimeout: { code: 'cold-start-timeout', status: 503, title: 'App did not start in time' },
  authKeysUnavailable: { code: 'auth-keys-unavailable', status: 503, title: 'Token signing keys unavailable' },
  authUnavailable: { code: 'auth-unavailable', status: 503, title: 'Authentication unavailable' },
  authOverloaded: { code: 'auth-overloaded', status: 503, title: 'Authentication overloaded' },
  runStoreUnavailable: { code: 'run-store-unavailable', status: 503, title: 'Run store unavailable' },
  replicaUnreachable: { code: 'replica-unreachable', status: 503, title: 'Replica unreachable' },
  timeout: { code: 'timeout', status: 504, title: 'Run exceeded its time limit' },
  runStoreQuotaExceeded: { code: 'run-store-quota-exceeded', status: 507, title: 'Namespace at its run store quota' },
} as const satisfies Record<string, ProblemSpec>;

/**
 * `request-rejected` with the status of whoever rejected the request: fastify, or a hook of the server hosting
 * the management API (a rate limiter's 429). The only type whose status is not its own.
 */
export function requestRejectedProblem(status: number): ProblemSpec {
  return { ...Problems.requestRejected, status };
}
