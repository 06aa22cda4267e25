// runlet dev listens on loopback with no authentication unless asked: any page open in the user's browser can
// send it requests, and a cross-site POST needs no preflight. So what changes state outside the run interface
// (the drain, a cancel, API keys) is refused when the browser says the request comes from another origin. The
// run interface stays open to other origins (a local front end calling a function is what it is for), and
// clients that are not browsers (curl, `runlet runs cancel`) send no Origin.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { PROBLEM_CONTENT_TYPE, ProblemError } from '../crds/problem.ts';
import { Problems } from '../crds/problems.ts';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
const GUARDED_PREFIXES = ['/admin/', '/v2/'];
/** Changes state whatever its method: an image tag of any page could GET it. */
const DRAIN_PATH = '/admin/drain';

/** The origins a page of this server has: as the README prints it, and as `localhost`. */
export function ownOrigins(port: number): Set<string> {
  return new Set([`http://127.0.0.1:${port}`, `http://localhost:${port}`, `http://[::1]:${port}`]);
}

export interface BrowserHeaders {
  origin?: string;
  'sec-fetch-site'?: string | string[];
}

/** Why a request is refused, or undefined when it may go on. */
export function foreignOriginRefusal(method: string, url: string, headers: BrowserHeaders, origins: ReadonlySet<string>): ProblemError | undefined {
  const path = url.split('?')[0]!;
  const changesState = path === DRAIN_PATH || (!SAFE_METHODS.has(method) && GUARDED_PREFIXES.some((prefix) => path.startsWith(prefix)));
  if (!changesState) return undefined;
  // Origin: sent with every cross-origin request but plain GETs; "null" (a sandboxed frame, a file: page) is never
  // one of this server's own. Sec-Fetch-Site: sent by current browsers with every request, GETs included.
  const { origin } = headers;
  const site = headers['sec-fetch-site'];
  const from = origin !== undefined && !origins.has(origin) ? origin : site === 'cross-site' || site === 'same-site' ? `another ${site === 'cross-site' ? 'site' : 'origin'}` : undefined;
  if (from === undefined) return undefined;
  return new ProblemError(
    Problems.forbidden,
    `a page of ${from} may not ${method} ${path} on runlet dev: only its own pages (its dashboard) and clients that are not browsers may change its state`,
  );
}

export function foreignOriginHook(origins: () => ReadonlySet<string>) {
  return async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const refusal = foreignOriginRefusal(request.method, request.url, request.headers, origins());
    if (refusal !== undefined) await reply.code(refusal.status).type(PROBLEM_CONTENT_TYPE).send(refusal.toBody());
  };
}
