// The operator's HTTP server: liveness, readiness and metrics. Built, not started: the composition registers
// more (the management API) before listening.
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { OperatorMetrics } from './metrics.ts';

export interface OperatorHealth {
  /** Ready to serve: the caches are filled (leaders and standbys alike, so a standby can take over at once). */
  ready(): { ready: boolean; detail: Record<string, unknown> };
}

export function buildOperatorServer(options: { metrics: OperatorMetrics; health: OperatorHealth; logger: Logger }): FastifyInstance {
  const { metrics, health } = options;
  // Requests are not logged (probes and scrapes would drown the rest); what routes log, such as a 500 of the
  // management API, goes to the operator's log. pino's Logger is fastify's logger type with more methods.
  const server = Fastify({
    loggerInstance: options.logger.child({ component: 'http' }) as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
  });
  // Liveness: the event loop answers. Stuck watches restart themselves (the watchdog), so they need no probe.
  server.get('/healthz', async () => ({ status: 'ok' }));
  server.get('/ready', async (_request, reply) => {
    const { ready, detail } = health.ready();
    reply.code(ready ? 200 : 503);
    return { status: ready ? 'ready' : 'starting', ...detail };
  });
  server.get('/metrics', async (_request, reply) => {
    reply.header('content-type', metrics.registry.contentType);
    return metrics.registry.metrics();
  });
  return server;
}
