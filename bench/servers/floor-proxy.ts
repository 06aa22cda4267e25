// The least a Node proxy of the sidecar's design costs here: fastify and the sidecar's own runtime client,
// nothing else (no run id, record, admission, metrics, log or envelope). The sync scenario measures it beside
// the sidecar, so the report shows what Node and fastify cost against nginx, apart from the sidecar's work.
//   node bench/servers/floor-proxy.ts --app-port PORT   → prints "listening on http://127.0.0.1:PORT"
import { parseArgs } from 'node:util';
import Fastify from 'fastify';
import { RuntimeConnections } from '../../sidecar/runtime-connections.ts';

const { values } = parseArgs({ options: { 'app-port': { type: 'string' } } });
if (!values['app-port']) throw new Error('floor-proxy: --app-port is required');
const connections = new RuntimeConnections(`http://127.0.0.1:${values['app-port']}`, { maxConnections: 66 });
const neverAborted = new AbortController().signal;

const app = Fastify({ logger: false });
app.removeAllContentTypeParsers();
app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));
app.post<{ Params: { function: string }; Body: Buffer }>('/v4/:project/:app/:function', async (request, reply) => {
  const answer = await connections.request({ path: '/' + request.params.function, runId: '-', stream: false, body: request.body, signal: neverAborted });
  reply.code(answer.statusCode).header('content-type', answer.contentType).send(answer.body);
});
const url = await app.listen({ host: '127.0.0.1', port: 0 });
process.stdout.write(`listening on ${url}\n`);
process.once('SIGTERM', () => process.exit(0));
