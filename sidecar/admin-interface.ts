// The admin port: probes (the sidecar's, and a custom app's liveness, which the sidecar asks of the app on the
// loopback), metrics, the replica's load (scraped by the operator's autoscaler) and drain. Kept off the run port
// so callers through the ingress never reach it, and so probes keep answering while the run port is saturated.
// Plain node:http, like the run port: the pod sidecar loads no web framework.
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { CANCEL_PATH, type AdminCancelAnswer } from './admin-cancel.ts';
import { DRAIN_PATH, drainTokenMatches } from './drain-token.ts';
import type { ReplicaLoadSource } from './load/load-source.ts';
import type { AppHealthCheck } from './runtimes/app-health.ts';
import type { Replica } from './replica.ts';
import { http } from './node-http.ts';

export interface AdminInterface {
  /** Answers an admin request; `path` is the URL's path below the admin prefix (`/ready`, `/metrics`, ...). */
  handle(request: IncomingMessage, response: ServerResponse, path: string): void;
}

export interface AdminOptions {
  /**
   * Who may drain: `open` where only the machine's own users reach the interface (`runlet dev`, on
   * 127.0.0.1); `{ token }` on the pod's admin port, which any pod can reach: `/drain/<token>` only; `{ token:
   * null }`: no drain through the port at all (SIGTERM still drains).
   */
  drain: 'open' | { token: string | null };
  /**
   * How long a drained replica that is still running (no SIGTERM followed: a drain by hand, or the preStop
   * of an app container that the kubelet restarts rather than stops) keeps passing liveness; then /healthz
   * fails, so the kubelet restarts the sidecar and the replica serves again. Default DRAINED_LIVENESS_MS.
   */
  drainedLivenessMs?: number;
  /**
   * The app this replica serves, in a pod: its runs in flight may be cancelled with `POST /cancel/<token>/<run_id>`
   * (admin-cancel.ts), the drain token guarding it as it guards /drain. Absent (`runlet dev`, whose management
   * API cancels directly): no such route.
   */
  cancels?: { projectId: string; appName: string };
  /**
   * The replica's load, served at `/load` for the operator's autoscaler, which scrapes every ready replica
   * (operator/autoscaling/load-scraper.ts). Absent (`runlet dev`: one replica, no autoscaler): no `/load`.
   */
  load?: ReplicaLoadSource;
  /**
   * A custom app's health path, asked on the loopback: `GET /app-healthz` answers 200 while it answers 2xx, 503
   * otherwise. The app container's liveness probe, so its server needs no port on the pod IP. Absent (a Python
   * app, a custom one without healthcheckEndpoint, `runlet dev`): no such route.
   */
  appHealth?: AppHealthCheck;
}

/**
 * Longer than the pod's termination margin (render/names.ts: TERMINATION_MARGIN_SECONDS, 30 s), the longest a
 * drained pod's app container takes to stop before the sidecar is sent SIGTERM: a pod that is stopping never
 * fails liveness for it (and a terminating pod's containers are not restarted anyway).
 */
export const DRAINED_LIVENESS_MS = 60_000;

/** The route of a custom app's liveness (operator/render/app-container.ts renders the app container's probes at it). */
export const APP_HEALTH_ROUTE = '/app-healthz';

const ROUTES = 'GET /healthz, /ready, /app-healthz, /metrics, /load; GET or POST /drain; POST /cancel';

export function createAdminInterface(replica: Replica, options: AdminOptions): AdminInterface {
  const drainedLivenessMs = options.drainedLivenessMs ?? DRAINED_LIVENESS_MS;
  const loadBody = options.load === undefined ? undefined : loadAnswer(options.load);

  /** Whether `path` is the drain route, as this mount takes it; null: not the drain route at all. */
  function drainAllowed(path: string): boolean | null {
    if (options.drain === 'open') return path === DRAIN_PATH ? true : null;
    if (path !== DRAIN_PATH && !path.startsWith(`${DRAIN_PATH}/`)) return null;
    const { token } = options.drain;
    return token !== null && path.startsWith(`${DRAIN_PATH}/`) && drainTokenMatches(path.slice(DRAIN_PATH.length + 1), token);
  }

  /** A cancel's run id when `path` is the cancel route with this replica's token; null: not the cancel route; false: a wrong token. */
  function cancelledRunId(path: string): string | false | null {
    if (options.cancels === undefined || !path.startsWith(`${CANCEL_PATH}/`)) return null;
    const rest = path.slice(CANCEL_PATH.length + 1);
    const slash = rest.indexOf('/');
    const token = options.drain === 'open' ? null : options.drain.token;
    if (slash === -1 || token === null || !drainTokenMatches(rest.slice(0, slash), token)) return false;
    // Run ids are UUIDs: a malformed escape names no run, so it is kept as it came and found in flight nowhere.
    const encoded = rest.slice(slash + 1);
    try {
      return decodeURIComponent(encoded);
    } catch {
      return encoded;
    }
  }

  async function answer(method: string, path: string): Promise<{ status: number; contentType: string; body: string }> {
    const read = method === 'GET' || method === 'HEAD';
    if (path === '/healthz' && read) {
      const drainedMs = replica.drainedForMs();
      if (drainedMs !== null && drainedMs >= drainedLivenessMs) {
        return json(503, { status: 'drained', error: `drained ${Math.round(drainedMs / 1000)} s ago and not stopped: restart to serve again` });
      }
      return json(200, { status: 'ok' });
    }
    if (path === '/ready' && read) {
      if (replica.ready) return json(200, { status: 'ready' });
      return json(503, { status: replica.draining ? 'draining' : 'starting' });
    }
    if (path === APP_HEALTH_ROUTE && read && options.appHealth !== undefined) {
      const { healthy, detail } = await options.appHealth.check();
      return json(healthy ? 200 : 503, { status: healthy ? 'ok' : 'failing', detail });
    }
    if (path === '/metrics' && read) {
      return { status: 200, contentType: replica.metrics.registry.contentType, body: await replica.metrics.registry.metrics() };
    }
    if (path === '/load' && read && loadBody !== undefined) return { status: 200, contentType: JSON_TYPE, body: loadBody() };
    const drain = drainAllowed(path);
    // GET too, so the app container's preStop can be an httpGet: it answers once the replica has drained.
    if (drain !== null && (read || method === 'POST')) {
      if (!drain) return json(403, { error: refusal(options.drain === 'open' ? null : options.drain.token) });
      await replica.drain();
      return json(200, { status: 'drained' });
    }
    const runId = cancelledRunId(path);
    if (runId !== null) {
      // Never echoed: the path may hold the token.
      if (method !== 'POST') return json(405, { error: 'a cancel is POST /cancel/<token>/<run_id>' });
      if (runId === false) return json(403, { error: 'cancelling a run needs the pod\'s drain token (POST /cancel/<token>/<run_id>)' });
      const { projectId, appName } = options.cancels!;
      const stopping: AdminCancelAnswer | null = replica.activeRuns.cancel(projectId, appName, runId);
      if (stopping === null) return json(404, { error: `run ${runId} is not in flight on this replica (finished, or never here)` });
      return json(202, stopping);
    }
    // Not a drain or cancel path here, so it holds no token: safe to echo.
    return json(404, { error: `${method} ${path} is not a route of the admin port: ${ROUTES}` });
  }

  return {
    handle(request, response, path) {
      answer(request.method ?? 'GET', path).then(
        ({ status, contentType, body }) => {
          response.writeHead(status, { 'content-type': contentType });
          response.end(body);
        },
        (err: unknown) => {
          const route = drainAllowed(path) !== null ? DRAIN_PATH : cancelledRunId(path) !== null ? CANCEL_PATH : path;
          replica.logger.error({ err, path: route }, 'admin request failed');
          response.writeHead(500, { 'content-type': JSON_TYPE });
          response.end(JSON.stringify({ error: `${route} failed: ${(err as Error).message}` }));
        },
      );
    },
  };
}

/**
 * The load's JSON, serialised once per change rather than per scrape: the meter keeps the same object while
 * the load is steady, and the autoscaler asks for it every half second.
 */
function loadAnswer(load: ReplicaLoadSource): () => string {
  let serialised = load.current();
  let body = JSON.stringify(serialised);
  return () => {
    const current = load.current();
    if (current !== serialised) {
      serialised = current;
      body = JSON.stringify(current);
    }
    return body;
  };
}

function refusal(token: string | null): string {
  return token === null
    ? 'this sidecar has no drain token (RUNLET_DRAIN_TOKEN), so its admin port drains nothing: send it SIGTERM'
    : 'draining needs the pod\'s drain token (GET /drain/<token>, as the app container\'s preStop hook has it)';
}

/** The admin port as its own server (the pod sidecar's); `runlet dev` mounts the interface under /admin instead. */
export function createAdminServer(admin: AdminInterface): Server {
  return http.createServer((request, response) => {
    const url = request.url ?? '/';
    const queryStart = url.indexOf('?');
    // Kubelets before 1.26 ask a hook's path as `http://ip:port/` + path, so `/drain/…` arrives as `//drain/…`.
    admin.handle(request, response, (queryStart === -1 ? url : url.slice(0, queryStart)).replace(/^\/{2,}/, '/'));
  });
}

const JSON_TYPE = 'application/json; charset=utf-8';

function json(status: number, value: object): { status: number; contentType: string; body: string } {
  return { status, contentType: JSON_TYPE, body: JSON.stringify(value) };
}
