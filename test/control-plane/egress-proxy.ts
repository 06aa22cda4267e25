// The API server's way into the real Node's network namespace (its egress selector's `cluster` connection,
// control-plane.sh): an HTTP CONNECT proxy listening on a Unix socket, run inside the namespace (node.sh), so
// the API server, on the machine's loopback, reaches the kubelet (`kubectl logs`, `exec`), pods and Services
// at their addresses there. A path crosses network namespaces; an address of 198.18.0.0/24 does not.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { connect, type Socket } from 'node:net';

export interface EgressProxy {
  close(): Promise<void>;
}

export async function startEgressProxy(options: { socketPath: string; onError: (error: Error) => void }): Promise<EgressProxy> {
  const server: Server = createServer((_request, response) => {
    response.writeHead(405, { allow: 'CONNECT', 'content-type': 'text/plain' }).end('only CONNECT is served here\n');
  });
  server.on('connect', (request: IncomingMessage, caller: Socket, head: Buffer) => tunnel(request, caller, head, options.onError));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.socketPath, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function tunnel(request: IncomingMessage, caller: Socket, head: Buffer, onError: (error: Error) => void): void {
  const target = targetOf(request.url ?? '');
  caller.on('error', () => caller.destroy());
  if (target === null) {
    caller.end(`HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain\r\n\r\nCONNECT wants host:port, got ${JSON.stringify(request.url)}\n`);
    return;
  }
  const upstream = connect(target.port, target.host);
  let established = false;
  upstream.once('connect', () => {
    established = true;
    // Nothing after the head: the API server refuses a tunnel whose answer came with bytes of the stream.
    caller.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    if (head.length > 0) upstream.write(head);
    upstream.pipe(caller);
    caller.pipe(upstream);
  });
  upstream.once('error', (error) => {
    onError(new Error(`CONNECT ${target.host}:${target.port}: ${error.message}`, { cause: error }));
    if (established) caller.destroy();
    else caller.end(`HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/plain\r\n\r\n${error.message}\n`);
  });
  caller.once('close', () => upstream.destroy());
}

function targetOf(authority: string): { host: string; port: number } | null {
  const colon = authority.lastIndexOf(':');
  if (colon <= 0) return null;
  const host = authority.slice(0, colon).replace(/^\[(.*)\]$/, '$1');
  const port = Number(authority.slice(colon + 1));
  return Number.isInteger(port) && port > 0 && port < 65536 ? { host, port } : null;
}
