// The pod sidecar's own run server (sidecar/run-server.ts) in front of a replica, on an ephemeral loopback port:
// e2e suites call the same apps through it and through `runlet dev`, so both front doors answer alike.
import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import type { Replica } from '../../sidecar/replica.ts';
import { createRunInterface } from '../../sidecar/run-interface.ts';
import { createRunServer } from '../../sidecar/run-server.ts';

export interface TestRunServer {
  /** `http://127.0.0.1:<port>` */
  url: string;
  server: Server;
  /** Stops at once: every connection is cut. */
  close(): Promise<void>;
}

/** The ways a caller reaches the run interface in these suites. */
export const FRONT_DOORS = ['runlet dev', 'the sidecar run server'] as const;

export async function startRunServer(replica: Replica): Promise<TestRunServer> {
  const server = createRunServer(createRunInterface(replica), pino({ level: process.env.RUNLET_TEST_LOG_LEVEL ?? 'silent' }));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    server,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
    },
  };
}
