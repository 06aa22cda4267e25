// The HTTP server a Runlet process has for itself: liveness, readiness and metrics, for the kubelet's probes and
// Prometheus. The operator's (operator/main.ts adds the management API and the dashboard) and the activator's
// admin port (activator/main.ts adds the calls waiting there) are this one. Built, not started: the composition
// registers more before listening.
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { IncomingHttpHeaders } from 'node:http';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';

export interface Readiness {
  ready: boolean;
  /** Said with the status, ready or not: what the process waits for. */
  detail: Record<string, unknown>;
}

export interface HealthServerOptions {
  /** Served at /metrics; none: no /metrics on this server (the operator's API port, which tenants reach). */
  registry?: Registry;
  logger: Logger;
  ready(): Readiness;
  /** The status /ready answers with its 503 (`starting`, `not ready`). */
  notReadyStatus: string;
}

export function buildHealthServer({ registry, logger, ready, notReadyStatus }: HealthServerOptions): FastifyInstance {
  // Requests are not logged (probes and scrapes would drown the rest); what routes log, such as a 500 of the
  // management API, goes to the process's log. pino's Logger is fastify's logger type with more methods.
  const server = Fastify({
    loggerInstance: logger.child({ component: 'http' }) as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
  });
  refuseUnroutedBodies(server);
  // Liveness: the event loop answers. Stuck watches restart themselves (the watchdog), so they need no probe.
  server.get('/healthz', async () => ({ status: 'ok' }));
  server.get('/ready', async (_request, reply) => {
    const readiness = ready();
    reply.code(readiness.ready ? 200 : 503);
    return { status: readiness.ready ? 'ready' : notReadyStatus, ...readiness.detail };
  });
  if (registry !== undefined) {
    server.get('/metrics', async (_request, reply) => {
      reply.header('content-type', registry.contentType);
      return registry.metrics();
    });
  }
  return server;
}

/**
 * Answers a request for no route that carries a body 404 as it arrives, its connection closed and its body unread.
 * Fastify would otherwise read the body (up to its bodyLimit, 1 MiB, into memory) before its 404, for any caller,
 * unauthenticated, on as many connections as it opens: the routes authenticate before reading, a 404 does not.
 * Added first, so that every route's and every prefix's not-found handler comes after it.
 */
export function refuseUnroutedBodies(server: FastifyInstance): void {
  server.addHook('onRequest', async (request, reply) => {
    if (!request.is404 || !carriesBody(request.headers)) return;
    reply.header('connection', 'close');
    const path = request.url.split('?', 1)[0];
    await reply.code(404).type('application/problem+json').send({ status: 404, detail: `no route for ${request.method} ${path}` });
    return reply;
  });
}

function carriesBody(headers: IncomingHttpHeaders): boolean {
  return headers['transfer-encoding'] !== undefined || (headers['content-length'] !== undefined && headers['content-length'] !== '0');
}
