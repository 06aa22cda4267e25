// A loopback TCP relay standing for a cluster Service: each connection goes to the port `target()` names when it
// arrives, or is cut at once when it names none (as a Service with no ready endpoint refuses connections).
import { connect, createServer, type Socket } from 'node:net';

export interface TcpRelay {
  port: number;
  close(): Promise<void>;
}

export async function startTcpRelay(target: () => number | undefined): Promise<TcpRelay> {
  const sockets = new Set<Socket>();
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  };
  const server = createServer((socket) => {
    track(socket);
    const port = target();
    if (port === undefined) return void socket.destroy();
    const upstream = connect(port, '127.0.0.1');
    track(upstream);
    socket.pipe(upstream).pipe(socket);
    socket.once('error', () => upstream.destroy());
    upstream.once('error', () => socket.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
