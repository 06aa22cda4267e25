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
export type FrontDoor = (typeof FRONT_DOORS)[number];

export interface OpenFrontDoor {
  /** Where run calls go: `http://127.0.0.1:<port>`. */
  origin: string;
  close(): Promise<void>;
}

/**
 * `door` for one test (a `beforeEach` that returns `close`): the dev server's own origin, or a sidecar run
 * server started for this test alone in front of the dev server's replica (with the head timeout given, the
 * dev server's own being set where it starts). Management calls stay on `dev.url`.
 *
 * A run server per test means new connections per test. The front passes a connection it does not answer
 * itself (a custom app's call, a GET) to node:http for the rest of that connection's life, and
 * fetch keeps connections alive from one test to the next: with one run server for a whole file, a test's
 * calls reach node:http instead of the front whenever fetch reuses such a connection.
 */
export async function openFrontDoor(door: FrontDoor, dev: { url: string; replica: Replica }, headTimeoutMs?: number): Promise<OpenFrontDoor> {
  if (door === 'runlet dev') return { origin: dev.url, close: async () => {} };
  const sidecar = await startRunServer(dev.replica, headTimeoutMs);
  return { origin: sidecar.url, close: () => sidecar.close() };
}

/** `headTimeoutMs`: the run port's head timeout (the body's is the replica's own). */
export async function startRunServer(replica: Replica, headTimeoutMs?: number): Promise<TestRunServer> {
  const logger = pino({ level: process.env.RUNLET_TEST_LOG_LEVEL ?? 'silent' });
  const timeouts = { headMs: headTimeoutMs, bodyMs: replica.bodyTimeoutMs };
  const server = createRunServer(createRunInterface(replica), logger, { bodyLimitBytes: replica.bodyLimitBytes, timeouts });
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
