// The admin port: probes (the sidecar's, and a custom app's liveness, which the sidecar asks of the app on the
// loopback), metrics, the replica's load (scraped by the operator's autoscaler) and drain. Kept off the run port
// so callers through the ingress never reach it, and so probes keep answering while the run port is saturated.
// Plain node:http, like the run port: the pod sidecar loads no web framework.
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { adminRequestSigned, ADMIN_SIGNATURE_HEADER, CANCEL_PATH, DRAIN_PATH, type AdminCancelAnswer } from './admin-cancel.ts';
import type { PodTermination } from './pod-termination.ts';
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
   * 127.0.0.1); on the pod's admin port, which any pod can reach, `{ pod }`: /drain drains only while the pod is
   * being deleted (pod-termination.ts), as when its app container's preStop hook asks, and otherwise changes
   * nothing; `{ pod: null }`: no drain through the port at all (SIGTERM still drains).
   */
  drain: 'open' | { pod: PodTermination | null };
  /**
   * How long a drained replica that is still running (no SIGTERM followed: a drain by hand, or the preStop
   * of an app container that the kubelet restarts rather than stops) keeps passing liveness; then /healthz
   * fails, so the kubelet restarts the sidecar and the replica serves again. Default DRAINED_LIVENESS_MS.
   */
  drainedLivenessMs?: number;
  /**
   * The app this replica serves, in a pod: its runs in flight may be cancelled with `POST /cancel/<run_id>`
   * signed with one of `keys()` (admin-cancel.ts: the namespace's admin key, read from its mounted Secret).
   * Absent (`runlet dev`, whose management API cancels directly): no such route.
   */
  cancels?: { projectId: string; appName: string; keys(): Promise<string[]> };
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
/** How often, and how far apart, /drain asks the API server whether the pod is being deleted before it gives up. */
const TERMINATION_CHECK_ATTEMPTS = 10;
const TERMINATION_CHECK_RETRY_MS = 1000;

export function createAdminInterface(replica: Replica, options: AdminOptions): AdminInterface {
  const drainedLivenessMs = options.drainedLivenessMs ?? DRAINED_LIVENESS_MS;
  const loadBody = options.load === undefined ? undefined : loadAnswer(options.load);

  /** A cancel's run id when `path` is the cancel route; null: not the cancel route. */
  function cancelledRunId(path: string): string | null {
    if (options.cancels === undefined || !path.startsWith(`${CANCEL_PATH}/`)) return null;
    const encoded = path.slice(CANCEL_PATH.length + 1);
    // Run ids are UUIDs: a malformed escape names no run, so it is kept as it came and found in flight nowhere.
    try {
      return decodeURIComponent(encoded);
    } catch {
      return encoded;
    }
  }

  /**
   * Whether this /drain may drain: always on `runlet dev`; on a pod once a drain has begun (SIGTERM: waiting for
   * it changes nothing) or the pod is being deleted. The API server is asked again for a while when it cannot
   * answer, so a preStop hook during a short outage still drains.
   */
  async function mayDrain(): Promise<{ allowed: true } | { allowed: false; status: number; error: string }> {
    if (options.drain === 'open' || replica.draining) return { allowed: true };
    const { pod } = options.drain;
    if (pod === null) return { allowed: false, status: 403, error: 'this sidecar does not know its pod, so its admin port drains nothing: send it SIGTERM' };
    let lastError: unknown;
    for (let attempt = 0; attempt < TERMINATION_CHECK_ATTEMPTS; attempt += 1) {
      if (attempt > 0) await new Promise((resolveLater) => setTimeout(resolveLater, TERMINATION_CHECK_RETRY_MS));
      try {
        if (await pod.terminating()) return { allowed: true };
        return { allowed: false, status: 409, error: 'this pod is not being deleted: /drain drains a pod only once it is (its preStop hook asks then); nothing was changed' };
      } catch (error) {
        lastError = error;
      }
    }
    return { allowed: false, status: 503, error: `whether this pod is being deleted could not be read from the API server: ${(lastError as Error).message}` };
  }

  async function answer(method: string, path: string, signature: string | string[] | undefined): Promise<{ status: number; contentType: string; body: string }> {
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
    if (path === DRAIN_PATH && (read || method === 'POST')) {
      // GET too, so the app container's preStop can be an httpGet: it answers once the replica has drained.
      const verdict = await mayDrain();
      if (!verdict.allowed) return json(verdict.status, { error: verdict.error });
      await replica.drain();
      return json(200, { status: 'drained' });
    }
    const runId = cancelledRunId(path);
    if (runId !== null) {
      if (method !== 'POST') return json(405, { error: 'a cancel is POST /cancel/<run_id>' });
      const { projectId, appName, keys } = options.cancels!;
      if (!adminRequestSigned(await keys(), signature, method, path)) {
        return json(403, { error: `cancelling a run needs the ${ADMIN_SIGNATURE_HEADER} header, signed with this namespace's admin key` });
      }
      const stopping: AdminCancelAnswer | null = replica.activeRuns.cancel(projectId, appName, runId);
      if (stopping === null) return json(404, { error: `run ${runId} is not in flight on this replica (finished, or never here)` });
      return json(202, stopping);
    }
    return json(404, { error: `${method} ${path} is not a route of the admin port: ${ROUTES}` });
  }

  return {
    handle(request, response, path) {
      answer(request.method ?? 'GET', path, request.headers[ADMIN_SIGNATURE_HEADER]).then(
        ({ status, contentType, body }) => {
          response.writeHead(status, { 'content-type': contentType });
          response.end(body);
        },
        (err: unknown) => {
          replica.logger.error({ err, path }, 'admin request failed');
          response.writeHead(500, { 'content-type': JSON_TYPE });
          response.end(JSON.stringify({ error: `${path} failed: ${(err as Error).message}` }));
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

/** The admin port as its own server (the pod sidecar's); `runlet dev` mounts the interface under /admin instead. */
export function createAdminServer(admin: AdminInterface): Server {
  return http.createServer((request, response) => {
    const url = request.url ?? '/';
    const queryStart = url.indexOf('?');
    // Kubelets before 1.26 ask a hook's path as `http://ip:port/` + path, so `/drain` arrives as `//drain`.
    admin.handle(request, response, (queryStart === -1 ? url : url.slice(0, queryStart)).replace(/^\/{2,}/, '/'));
  });
}

const JSON_TYPE = 'application/json; charset=utf-8';

function json(status: number, value: object): { status: number; contentType: string; body: string } {
  return { status, contentType: JSON_TYPE, body: JSON.stringify(value) };
}
