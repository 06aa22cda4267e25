// Pods share 127.0.0.1 here, so every port a pod declares gets a free local port of its own. Ports come from
// below the kernel's ephemeral range: a port chosen now is bound by the pod's process only later, and in
// between every `listen(0)` and outgoing connection on the machine (other tests' servers and clients) takes
// its number from the ephemeral range, never from here. A candidate is checked free by binding it, and
// ports handed out are remembered so two pods of this process never share one.
import { randomInt } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

const LOWEST_PORT = 10_000;
const LINUX_DEFAULT_EPHEMERAL_START = 32_768;
const ATTEMPTS = 200;

const handedOut = new Set<number>();

function ephemeralRangeStart(): number {
  try {
    const [start] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/);
    const value = Number(start);
    return Number.isInteger(value) && value > LOWEST_PORT + 1000 ? value : LINUX_DEFAULT_EPHEMERAL_START;
  } catch {
    return LINUX_DEFAULT_EPHEMERAL_START;
  }
}

const highestPort = ephemeralRangeStart() - 1;

function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** A free port on 127.0.0.1, below the ephemeral range, not yet handed out by this process. */
export async function allocatePort(): Promise<number> {
  for (let attempt = 0; attempt < ATTEMPTS; attempt += 1) {
    const port = randomInt(LOWEST_PORT, highestPort + 1);
    if (handedOut.has(port) || !(await isFree(port))) continue;
    handedOut.add(port);
    return port;
  }
  throw new Error(`no free port on 127.0.0.1 between ${LOWEST_PORT} and ${highestPort} after ${ATTEMPTS} attempts`);
}

/** Returns a stopped pod's ports, so a long run of tests does not exhaust the set. */
export function releasePorts(ports: Iterable<number>): void {
  for (const port of ports) handedOut.delete(port);
}
