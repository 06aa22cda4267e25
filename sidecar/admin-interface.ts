// The admin port: probes, metrics and drain. Kept off the run port so callers through the ingress never
// reach it, and so probes keep answering while the run port is saturated. Plain node:http, like the run port:
// the pod sidecar loads no web framework.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Replica } from './replica.ts';

export interface AdminInterface {
  /** Answers an admin request; `path` is the URL's path below the admin prefix (`/ready`, `/metrics`, ...). */
  handle(request: IncomingMessage, response: ServerResponse, path: string): void;
}

export function createAdminInterface(replica: Replica): AdminInterface {
  async function answer(method: string, path: string): Promise<{ status: number; contentType: string; body: string }> {
    const read = method === 'GET' || method === 'HEAD';
    if (path === '/healthz' && read) return json(200, { status: 'ok' });
    if (path === '/ready' && read) {
      if (replica.ready) return json(200, { status: 'ready' });
      return json(503, { status: replica.draining ? 'draining' : 'starting' });
    }
    if (path === '/metrics' && read) {
      return { status: 200, contentType: replica.metrics.registry.contentType, body: await replica.metrics.registry.metrics() };
    }
    // GET too, so the app container's preStop can be an httpGet: it answers once the replica has drained.
    if (path === '/drain' && (read || method === 'POST')) {
      await replica.drain();
      return json(200, { status: 'drained' });
    }
    return json(404, { error: `${method} ${path} is not a route of the admin port: GET /healthz, /ready, /metrics; GET or POST /drain` });
  }

  return {
    handle(request, response, path) {
      answer(request.method ?? 'GET', path).then(
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

/** The admin port as its own server (the pod sidecar's); `runlet dev` mounts the interface under /admin instead. */
export function createAdminServer(admin: AdminInterface): Server {
  return createServer((request, response) => {
    const url = request.url ?? '/';
    const queryStart = url.indexOf('?');
    admin.handle(request, response, queryStart === -1 ? url : url.slice(0, queryStart));
  });
}

const JSON_TYPE = 'application/json; charset=utf-8';

function json(status: number, value: object): { status: number; contentType: string; body: string } {
  return { status, contentType: JSON_TYPE, body: JSON.stringify(value) };
}
