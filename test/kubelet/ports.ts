// Pods share 127.0.0.1 here, so every port a pod declares gets a free local port of its own. The kernel
// picks it (bind to 0, read it, release it); ports handed out are remembered so two pods started at the
// same moment never receive the same number before either has bound it.
import { createServer } from 'node:net';

const handedOut = new Set<number>();

async function kernelPickedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('a TCP listener on 127.0.0.1 reported no port');
  return address.port;
}

/** A free port on 127.0.0.1 not yet handed out by this process. */
export async function allocatePort(): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt += 1) {
    const port = await kernelPickedPort();
    if (!handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error('could not find a free port on 127.0.0.1 that was not handed out already (100 attempts)');
}

/** Returns ports of a stopped pod, so a long run of tests does not exhaust the set. */
export function releasePorts(ports: Iterable<number>): void {
  for (const port of ports) handedOut.delete(port);
}
