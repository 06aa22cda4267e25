// The results collector a pod's sidecar sends its run records to (`--run-store results`), as the operator serves
// it: the collector's own fastify plugin writing to a real PostgreSQL (Debian's, started here with durable
// commits, as in production). Its own process, as in a cluster, where it runs in the operator's pod.
//   node bench/servers/results-collector.ts --namespace NS   → prints "listening on http://127.0.0.1:PORT"
//   GET /stats   → {"rows"}: the run records PostgreSQL holds
// A batch's token here is `bench.<app>.<pod>` (benchTokenOf): who sends is a TokenReview in a cluster, one call to
// the API server per token per minute, which the sidecar's side of the measurement does not include either way.
import { parseArgs } from 'node:util';
import Fastify from 'fastify';
import { resultsCollector } from '../../results/collector.ts';
import { openResults } from '../../results/open.ts';
import { testLogger } from '../../test/support/logger.ts';
import { startPostgres } from '../../test/support/postgres.ts';

const { values } = parseArgs({ options: { namespace: { type: 'string' } } });
const namespace = values.namespace;
if (namespace === undefined) throw new Error('results-collector: --namespace is required');

const server = await startPostgres({ durable: true });
const results = await openResults({ dsn: server.dsn(await server.createDatabase('bench')), logger: testLogger() });
const app = Fastify({ logger: false });
await app.register(resultsCollector, {
  store: results.store,
  identify: async (token) => {
    const [prefix, appName, podName] = token.split('.');
    return prefix === 'bench' && appName && podName ? { namespace, appName, podName } : { status: 401, detail: 'not a bench token' };
  },
});
app.get('/stats', async () => {
  const { rows } = await results.pool.query<{ rows: string }>('SELECT count(*) AS rows FROM runlet_runs');
  return { rows: Number(rows[0]!.rows) };
});
const address = await app.listen({ host: '127.0.0.1', port: 0 });
console.log(`listening on ${address}`);

async function stop(): Promise<void> {
  await app.close();
  await results.close();
  await server.stop();
  process.exit(0);
}
process.once('SIGTERM', () => void stop());
process.once('SIGINT', () => void stop());
