// Builds the two OpenAPI documents exactly as the servers serve them: the run interface's and the management
// interface's plugins on a server without apps, asked over HTTP (inject). `npm run openapi` writes them to
// docs/; a test fails when the committed copies are stale.
import Fastify from 'fastify';
import pino from 'pino';
import { managementApi } from '../management/routes.ts';
import { AppRegistry } from '../sidecar/apps.ts';
import { Replica } from '../sidecar/replica.ts';
import { createRunInterface } from '../sidecar/run-interface.ts';
import { runInterfaceRoutes } from '../sidecar/run-interface-routes.ts';
import type { RunSource } from '../management/run-source.ts';
import type { ApiKeyStore } from '../management/api-keys.ts';
import type { RunStore } from '../sidecar/runs/store.ts';

export const DOCUMENT_FILES = { run: 'docs/openapi-run.json', management: 'docs/openapi-management.json' } as const;

/** A run store that stores and finds nothing: for building the servers only to describe them. */
export const noRuns: RunStore & RunSource = {
  save: () => undefined,
  saveDurably: async () => undefined,
  has: () => false,
  flush: async () => undefined,
  close: async () => undefined,
  listRuns: async () => ({ items: [], hasMore: false }),
  getRun: async () => undefined,
};

/** The key operations are documented whatever stores the keys; this store makes none. */
export const noKeys: ApiKeyStore = {
  list: async () => [],
  create: async () => {
    throw new Error('the OpenAPI document is built without making keys');
  },
  revoke: async () => undefined,
};

export async function buildOpenApiDocuments(): Promise<{ run: object; management: object }> {
  const apps = new AppRegistry();
  const replica = new Replica({ apps, store: noRuns, replicaName: 'openapi', logger: pino({ level: 'silent' }) });
  const server = Fastify({ logger: false });
  try {
    await server.register(runInterfaceRoutes(createRunInterface(replica)));
    await server.register(managementApi, { runs: noRuns, apps: { hasApp: () => false }, appList: () => [], canceller: replica.activeRuns, keys: noKeys });
    const run = await server.inject({ method: 'GET', url: '/v4/openapi.json' });
    const management = await server.inject({ method: 'GET', url: '/v2/openapi.json' });
    return { run: run.json(), management: management.json() };
  } finally {
    await server.close();
    await replica.deliverer.close();
  }
}

export function serialise(document: object): string {
  return JSON.stringify(document, null, 2) + '\n';
}
