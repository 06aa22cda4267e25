// The admin port: probes, metrics and drain. Kept off the run port so callers through the ingress never
// reach it, and so probes keep answering while the run port is saturated.
import type { FastifyInstance } from 'fastify';
import type { Replica } from './replica.ts';

export function adminInterface(replica: Replica) {
  return async function register(app: FastifyInstance): Promise<void> {
    app.get('/healthz', async () => ({ status: 'ok' }));
    app.get('/ready', async (_request, reply) => {
      if (replica.ready) return { status: 'ready' };
      reply.code(503);
      return { status: replica.draining ? 'draining' : 'starting' };
    });
    app.get('/metrics', async (_request, reply) => {
      reply.header('content-type', replica.metrics.registry.contentType);
      return replica.metrics.registry.metrics();
    });
    // GET too, so the app container's preStop can be an httpGet: it answers once the replica has drained.
    const drain = async (): Promise<{ status: string }> => {
      await replica.drain();
      return { status: 'drained' };
    };
    app.get('/drain', drain);
    app.post('/drain', drain);
  };
}
