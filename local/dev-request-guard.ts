// Who `runlet dev` serves. It listens on 127.0.0.1 with no authentication by default, and every page open in the
// user's browser can send requests there. Three rules, judged on every request before any route runs:
//
// 1. The Host must be a loopback name (localhost, 127.0.0.1, [::1], *.localhost; any port) or one the user
//    allowed (`--allow-host`). A page of another site that rebinds its own name to 127.0.0.1 (DNS rebinding) is
//    same-origin with itself as far as the browser knows, so it could read runs, kept results and keys; its
//    requests still carry its own name as Host, and are refused 421.
// 2. A request that changes state (any method but GET, HEAD, OPTIONS) from a page of another origin — as the
//    browser says in `Origin` or `Sec-Fetch-Site`, which pages cannot set — is refused 403; except a run call
//    with a JSON body: a browser sends that only after a CORS preflight, and the run interface is open to a
//    local front end on another port, whose dev proxy forwards its Origin.
// 3. Outside the run interface (the management API, the admin paths), a request that changes state must also
//    carry proof that a browser would have asked a preflight for it: a JSON content type, the `X-Runlet-Client`
//    header, or a method other than POST. A cross-site form, or a `no-cors` fetch, has none. The dashboard's own
//    pages (`Sec-Fetch-Site: same-origin`) need none. runlet dev grants no preflight to another origin.
//
// Which rules apply depends on the route that matched — as fastify routed the request (after its decoding of
// the path), never the raw path — or, for a call the run port's front answers itself, on the run interface's
// own reading of its path (guardedRunInterface).
import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { PROBLEM_CONTENT_TYPE, ProblemError } from '../crds/problem.ts';
import { Problems, requestRejectedProblem } from '../crds/problems.ts';
import { parseRunPathOrNull, pathOf } from '../run-request/run-path.ts';
import { PASS_ON, type HeadScreening, type RunInterface } from '../sidecar/run-interface.ts';

/** The header a client that is not a browser sends to change state without a JSON body (`runlet runs cancel`, curl). */
export const CLIENT_HEADER = 'x-runlet-client';
/** Host names served whatever `--allow-host` says, and every name under `.localhost` (RFC 6761: always loopback). */
const LOOPBACK_NAMES: readonly string[] = ['localhost', '127.0.0.1', '[::1]'];
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
/** Methods a page of another origin may send without a preflight. */
const SIMPLE_METHODS = new Set(['GET', 'HEAD', 'POST']);
/** A Host header's value: a name or an IPv6 literal, then an optional port. Anything else is no loopback name. */
const HOST_SYNTAX = /^(\[[0-9a-f:.]+\]|[a-z0-9.-]+)(?::(\d{1,5}))?$/;
/** An `Origin` as browsers serialise an http one. */
const ORIGIN_SYNTAX = /^http:\/\/(\[[0-9a-f:.]+\]|[a-z0-9.-]+)(?::(\d{1,5}))?$/;

/** Where a request goes: the run interface (`/v4/...`), or anything else (management API, admin, dashboard). */
export type DevRouteKind = 'run' | 'other';

export interface DevRequest {
  method: string;
  kind: DevRouteKind;
  headers: IncomingHttpHeaders;
}

export class DevRequestGuard {
  readonly #extraHosts: ReadonlySet<string>;

  /** `allowedHosts`: names served besides the loopback ones (`--allow-host`), as validated by allowedHostName. */
  constructor(allowedHosts: readonly string[] = []) {
    this.#extraHosts = new Set(allowedHosts.map((name) => name.toLowerCase()));
  }

  /** Why `request` is refused, or undefined when it may go on. */
  refusal(request: DevRequest): ProblemError | undefined {
    const { method, kind, headers } = request;
    const host = this.#servedHost(headers.host);
    if (host === null) return this.#misdirected(headers.host);
    if (SAFE_METHODS.has(method)) return undefined;
    const from = this.#foreignPage(headers, host.port);
    const preflighted = !SIMPLE_METHODS.has(method) || isJsonContentType(headers['content-type']) || headers[CLIENT_HEADER] !== undefined;
    if (kind === 'run') {
      if (from === undefined || preflighted) return undefined;
      return new ProblemError(
        Problems.forbidden,
        `a page of ${from} may not ${method} to a function of runlet dev without a JSON body (Content-Type: application/json): a cross-site form could send that`,
      );
    }
    if (from !== undefined) {
      return new ProblemError(
        Problems.forbidden,
        `a page of ${from} may not ${method} on runlet dev: only its own pages (its dashboard) and clients that are not browsers may change its state`,
      );
    }
    if (preflighted || headers['sec-fetch-site'] === 'same-origin') return undefined;
    return new ProblemError(
      Problems.forbidden,
      `runlet dev takes a ${method} outside the run interface only with Content-Type: application/json or an ${CLIENT_HEADER} header (any value, e.g. -H '${CLIENT_HEADER}: curl'), so that no page of another site can send it as a form`,
    );
  }

  /** The fastify hook: judges each request on the route it matched. */
  readonly onRequest = async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const route = request.routeOptions.url;
    const kind: DevRouteKind = route !== undefined && route.startsWith('/v4/') ? 'run' : 'other';
    const refusal = this.refusal({ method: request.method, kind, headers: request.headers });
    if (refusal !== undefined) await reply.code(refusal.status).type(PROBLEM_CONTENT_TYPE).send(refusal.toBody());
  };

  /** The host name and port of a Host header naming this server; null for any other. */
  #servedHost(value: string | undefined): { name: string; port: string } | null {
    const match = value === undefined ? null : HOST_SYNTAX.exec(value.toLowerCase());
    if (!match) return null;
    const name = match[1]!;
    return this.#serves(name) ? { name, port: match[2] ?? '80' } : null;
  }

  #serves(name: string): boolean {
    return LOOPBACK_NAMES.includes(name) || name.endsWith('.localhost') || this.#extraHosts.has(name);
  }

  /**
   * The page of another origin a browser says the request comes from, or undefined. A page of this server is
   * one at a name it serves on the port the request was sent to: the dashboard under `localhost` or `127.0.0.1`.
   */
  #foreignPage(headers: IncomingHttpHeaders, port: string): string | undefined {
    const { origin } = headers;
    if (origin !== undefined) {
      const match = ORIGIN_SYNTAX.exec(origin);
      if (!match || !this.#serves(match[1]!) || (match[2] ?? '80') !== port) return origin;
    }
    // Sent by current browsers with every request, GETs included; absent from other clients.
    const site = headers['sec-fetch-site'];
    if (site === 'cross-site') return 'another site';
    if (site === 'same-site') return 'another origin';
    return undefined;
  }

  #misdirected(host: string | undefined): ProblemError {
    const served = [...LOOPBACK_NAMES, '*.localhost', ...this.#extraHosts].join(', ');
    const asked = host === undefined ? 'a request without a Host header' : `a request for host "${host}"`;
    return new ProblemError(
      requestRejectedProblem(421),
      `runlet dev serves only requests addressed to ${served} (any port), not ${asked}: a page of another site that points its own name at ` +
        'this machine (DNS rebinding) would be addressed so. To serve another name (a tunnel, a container\'s name for this machine), ' +
        'start runlet dev with --allow-host NAME',
    );
  }
}

/** A name `--allow-host` may add: a host name or an IP literal, without a port; null when it is none. */
export function allowedHostName(value: string): string | null {
  const match = HOST_SYNTAX.exec(value.toLowerCase());
  return match && match[2] === undefined ? match[1]! : null;
}

/** application/json, or a `+json` type: no content type a form or a preflight-free fetch can send. */
function isJsonContentType(value: string | undefined): boolean {
  if (value === undefined) return false;
  const essence = value.split(';', 1)[0]!.trim().toLowerCase();
  return essence === 'application/json' || /^application\/[!#$%&'*+.^_`|~0-9a-z-]+\+json$/.test(essence);
}

/**
 * The run interface as the run port's front calls it, with the guard first: a call the guard refuses is refused
 * by screenHead with its problem, and handleWhole leaves it to node:http (fastify's hook answers it). Every call
 * the front reads is a POST to the run interface: the inner interface answers only paths it reads as runs.
 */
export function guardedRunInterface(inner: RunInterface, guard: DevRequestGuard): RunInterface {
  const refusal = (headers: IncomingHttpHeaders) => guard.refusal({ method: 'POST', kind: 'run', headers });
  return {
    handle: (request, response) => inner.handle(request, response),
    handleWhole: (request, answer) => refusal(request.headers) === undefined && inner.handleWhole(request, answer),
    screenHead(url, headers): HeadScreening {
      const problem = refusal(headers);
      if (problem === undefined) return inner.screenHead(url, headers);
      // A path that is no run's is fastify's to route (and so to judge), whatever its headers.
      return parseRunPathOrNull(pathOf(url)) === null ? PASS_ON : problem;
    },
    bodyBounds: inner.bodyBounds,
    requestRefused: (problem) => inner.requestRefused(problem),
  };
}
