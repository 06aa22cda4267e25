// The OpenAPI documents: current, valid OpenAPI 3.0.0, version 1.0.0, security per operation, and in step with
// the routes the servers answer.
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { Validator } from '@seriousme/openapi-schema-validator';
import Fastify, { type RouteOptions } from 'fastify';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildOpenApiDocuments, DOCUMENT_FILES, noKeys, noRuns, serialise } from '../../docs/openapi-documents.ts';
import { managementApi } from '../../management/routes.ts';
import { AppRegistry } from '../../sidecar/apps.ts';
import { Replica } from '../../sidecar/replica.ts';
import { createRunInterface } from '../../sidecar/run-interface.ts';
import { runInterfaceRoutes } from '../../sidecar/run-interface-routes.ts';

const ROOT = resolve(import.meta.dirname, '../..');
type Document = {
  openapi: string;
  info: { version: string };
  security?: unknown;
  components: { securitySchemes: Record<string, { type: string; scheme: string }> };
  paths: Record<string, Record<string, { security?: Array<Record<string, unknown>>; operationId?: string; tags?: string[] }>>;
};

let documents: { run: Document; management: Document };
beforeAll(async () => {
  documents = (await buildOpenApiDocuments()) as typeof documents;
});

describe('OpenAPI documents', () => {
  it.each(Object.entries(DOCUMENT_FILES))('the committed %s document is current (npm run openapi)', async (name, file) => {
    const committed = await readFile(resolve(ROOT, file), 'utf8');
    expect(committed, `${file} is stale: run npm run openapi`).toBe(serialise(documents[name as keyof typeof documents]));
  });

  it.each(['run', 'management'] as const)('the %s document is valid OpenAPI 3.0.0, version 1.0.0', async (name) => {
    const document = documents[name];
    const result = await new Validator().validate(structuredClone(document));
    expect(result.errors ?? [], JSON.stringify(result.errors, null, 2)).toEqual([]);
    expect(result.valid).toBe(true);
    expect(document.openapi).toBe('3.0.0');
    expect(document.info.version).toBe('1.0.0');
  });

  it.each(['run', 'management'] as const)('the %s document declares bearer auth per operation, not at the top level', (name) => {
    const document = documents[name];
    expect(document.security).toBeUndefined();
    expect(document.components.securitySchemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' });
    const operations = Object.values(document.paths).flatMap((operations) => Object.values(operations));
    // The documents themselves (tag meta) are served without auth; every operation on apps and runs needs it.
    const [meta, secured] = [operations.filter((o) => o.tags?.includes('meta')), operations.filter((o) => !o.tags?.includes('meta'))];
    expect(meta.length).toBeGreaterThan(0);
    expect(secured.length).toBeGreaterThan(0);
    for (const operation of meta) expect(operation.security, operation.operationId).toBeUndefined();
    for (const operation of secured) expect(operation.security, operation.operationId).toEqual([{ bearerAuth: [] }]);
  });

  it('describes list runs with the bearer scheme on the operation (interface 5.5)', () => {
    const listRuns = documents.management.paths['/v2/projects/{project_id}/apps/{app_id}/runs']!.get!;
    expect(listRuns.operationId).toBe('listRuns');
    expect(listRuns.security).toEqual([{ bearerAuth: [] }]);
  });
});

describe('routes and operations', () => {
  const routes: RouteOptions[] = [];
  const server = Fastify({ logger: false });
  const replica = new Replica({ apps: new AppRegistry(), store: noRuns, replicaName: 'contract', logger: pino({ level: 'silent' }) });

  beforeAll(async () => {
    server.addHook('onRoute', (route) => {
      routes.push(route);
    });
    await server.register(runInterfaceRoutes(createRunInterface(replica)));
    // With a canceller and keys, as runlet dev serves it with an auth key: the document describes those operations.
    await server.register(managementApi, { runs: noRuns, apps: { hasApp: () => false }, appList: () => [], canceller: replica.activeRuns, keys: noKeys });
    await server.ready();
  });
  afterAll(async () => {
    await server.close();
    await replica.deliverer.close();
  });

  /** Routes deliberately left out of the documents, and why. */
  const UNDOCUMENTED = new Map([
    ['/v4/:project_id/:app_name/*', 'deeper custom-app paths: the same operations as /{function}, which OpenAPI 3.0 cannot template'],
    ['/v2/projects/:project_id/apps', 'only for the refused methods (405 with Allow), which are refusals, not operations'],
    ['/v2/projects/:project_id/apps/:app_id/runs', 'only for the refused methods (405 with Allow), which are refusals, not operations'],
    ['/v2/projects/:project_id/apps/:app_id/runs/:run_id', 'only for the refused methods (405 with Allow), which are refusals, not operations'],
  ]);

  it('describes every route the servers answer', () => {
    const described = { ...documents.run.paths, ...documents.management.paths };
    for (const route of routes) {
      const template = route.url.replaceAll(/:(\w+)/g, '{$1}');
      for (const method of [route.method].flat()) {
        const operation = described[template]?.[method.toLowerCase()];
        if (operation) continue;
        const hidden = (route.schema as { hide?: boolean } | undefined)?.hide === true;
        expect(hidden && UNDOCUMENTED.has(route.url), `${method} ${route.url} is answered but not described`).toBe(true);
      }
    }
  });

  it('answers every described operation (no route-not-found)', async () => {
    for (const [name, document] of Object.entries(documents)) {
      for (const [template, operations] of Object.entries(document.paths)) {
        const url = template.replaceAll(/\{(\w+)\}/g, 'x');
        for (const method of Object.keys(operations)) {
          const response = await server.inject({ method: method.toUpperCase() as 'GET', url });
          const body = response.body ? (JSON.parse(response.body) as { type?: string }) : {};
          expect(body.type, `${name}: ${method.toUpperCase()} ${url} → ${response.statusCode}`).not.toBe('https://runlet.dev/problems#route-not-found');
          expect(response.statusCode, `${method.toUpperCase()} ${url}`).not.toBe(405);
        }
      }
    }
  });
});
