// Every platform error of the run interface, declared once. Handlers throw `new ProblemError(Problems.x, detail)`;
// sidecar/reply.ts renders it. Nothing of the user's function runs when one of these is answered before the call.
import type { ProblemSpec } from './problem.ts';

export const Problems = {
  invalidJson: { code: 'invalid-json', status: 400, title: 'Request body is not valid JSON' },
  bodyNotObject: { code: 'body-not-object', status: 400, title: 'Request body is not a JSON object' },
  invalidParameter: { code: 'invalid-parameter', status: 400, title: 'Invalid query parameter' },
  invalidHeader: { code: 'invalid-header', status: 400, title: 'Invalid request header' },
  unauthorized: { code: 'unauthorized', status: 401, title: 'Authentication required' },
  forbidden: { code: 'forbidden', status: 403, title: 'Not allowed' },
  appNotFound: { code: 'app-not-found', status: 404, title: 'App not found' },
  functionNotFound: { code: 'function-not-found', status: 404, title: 'Function not found' },
  routeNotFound: { code: 'route-not-found', status: 404, title: 'No such route' },
  methodNotAllowed: { code: 'method-not-allowed', status: 405, title: 'Method not allowed' },
  requestTimeout: { code: 'request-timeout', status: 408, title: 'Request body stopped arriving' },
  bodyTooLarge: { code: 'body-too-large', status: 413, title: 'Request body too large' },
  invalidArguments: { code: 'invalid-arguments', status: 422, title: 'Arguments do not match the function' },
  internal: { code: 'internal', status: 500, title: 'Internal error' },
  upstreamFailed: { code: 'upstream-failed', status: 502, title: "The app's runtime failed to answer" },
  resultTooLarge: { code: 'result-too-large', status: 502, title: "The function's result is over the limit" },
  appUnavailable: { code: 'app-unavailable', status: 503, title: 'App not ready' },
  overCapacity: { code: 'over-capacity', status: 503, title: 'App at capacity' },
  draining: { code: 'draining', status: 503, title: 'Replica is shutting down' },
  authKeysUnavailable: { code: 'auth-keys-unavailable', status: 503, title: 'Token signing keys unavailable' },
  runStoreUnavailable: { code: 'run-store-unavailable', status: 503, title: 'Run store unavailable' },
  timeout: { code: 'timeout', status: 504, title: 'Run exceeded its time limit' },
} as const satisfies Record<string, ProblemSpec>;
