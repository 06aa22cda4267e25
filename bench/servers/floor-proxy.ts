// The least a Node proxy of the sidecar's design costs here: a node:http server and the sidecar's own runtime
// client, nothing else (no run id, record, admission, metrics, log or envelope). The sync scenario measures it
// beside the sidecar, so the report shows what Node itself costs against nginx, apart from the sidecar's work.
//   node bench/servers/floor-proxy.ts --app-port PORT   → prints "listening on http://127.0.0.1:PORT"
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { RuntimeConnections, type CallStopper } from '../../sidecar/runtimes/runtime-connections.ts';

const { values } = parseArgs({ options: { 'app-port': { type: 'string' } } });
if (!values['app-port']) throw new Error('floor-proxy: --app-port is required');
const connections = new RuntimeConnections(`http://127.0.0.1:${values['app-port']}`, { maxConnections: 66 });
const neverStopped: CallStopper = { stopReason: null, onStop: null };

const server = createServer((request, response) => {
  const url = request.url ?? '/';
  const chunks: Buffer[] = [];
  request.on('data', (chunk: Buffer) => chunks.push(chunk));
  request.on('end', () => {
    const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
    connections.request({ path: url.slice(url.lastIndexOf('/')), runId: '-', stream: false, body, stopper: neverStopped }).then(
      (answer) => {
        response.writeHead(answer.statusCode, ['content-type', answer.contentType]);
        response.end(answer.body);
      },
      (err: unknown) => {
        response.writeHead(502, ['content-type', 'text/plain']);
        response.end(String(err));
      },
    );
  });
});
server.listen(0, '127.0.0.1');
await once(server, 'listening');
process.stdout.write(`listening on http://127.0.0.1:${(server.address() as AddressInfo).port}\n`);
process.once('SIGTERM', () => process.exit(0));
