// The operator's HTTP server: liveness, readiness and metrics. Built, not started: the composition (or the
// management API, which mounts its routes here) registers more before listening.
import Fastify, { type FastifyInstance } from 'fastify';
import type { OperatorMetrics } from './metrics.ts';

export interface OperatorHealth {
  /** Ready to serve: the caches are filled (leaders and standbys alike, so a standby can take over at once). */
  ready(): { ready: boolean; detail: Record<string, unknown> };
}

export function buildOperatorServer(options: { metrics: OperatorMetrics; health: OperatorHealth }): FastifyInstance {
  const { metrics, health } = options;
  const server = Fastify({ logger: false });
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
