// What a real API server does with a custom resource beyond storing it, compared with kube-apiserver 1.20
// (the control-plane tier): discovery names, Table columns, the patch types it takes, pruning and
// defaulting by the CRD's schema, and dry runs. The CRDs are the project's own (crds/*.yaml).

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { describe, expect, it } from 'vitest';
import { serverPerTest } from './test-helpers.ts';

const kube = serverPerTest(() => ({}));
const CRDS = ['apps.runlet.dev.yaml', 'runlogs.runlet.dev.yaml'].map((file) =>
  parseYaml(readFileSync(join(import.meta.dirname, '../../crds', file), 'utf8')) as object,
);
const APPS = '/apis/runlet.dev/v1alpha1/namespaces/default/apps';
const TABLE = 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json';

async function call(method: string, path: string, body?: unknown, contentType = 'application/json', accept = 'application/json') {
  const response = await kube.server.fetch(path, {
    method,
    headers: { 'content-type': contentType, accept },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Record<string, any> }; // eslint-disable-line @typescript-eslint/no-explicit-any -- JSON answers of many shapes
}

async function installCrds(): Promise<void> {
  for (const crd of CRDS) expect((await call('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd)).status).toBe(201);
}

const app = (name: string, extra: object = {}) => ({
  apiVersion: 'runlet.dev/v1alpha1',
  kind: 'App',
  metadata: { name },
  spec: { runtime: { python: { code: { baked: true } } } },
  ...extra,
});

describe('custom resources as a real API server serves them', () => {
  it('lists shortNames and categories in discovery, for CRDs and built-ins', async () => {
    await installCrds();
    const group = (await call('GET', '/apis/runlet.dev/v1alpha1')).body;
    const byName = Object.fromEntries(group.resources.map((r: { name: string }) => [r.name, r]));
    expect(byName.runlogs).toMatchObject({ shortNames: ['rl'], categories: ['runlet'] });
    expect(byName.apps).toMatchObject({ categories: ['runlet'] });
    expect(byName.apps.shortNames).toBeUndefined();
    const core = (await call('GET', '/api/v1')).body;
    expect(core.resources.find((r: { name: string }) => r.name === 'pods')).toMatchObject({ shortNames: ['po'], categories: ['all'] });
  });

  it('answers Tables with the CRD printer columns, and Name and Age for other kinds', async () => {
    await installCrds();
    await call('POST', APPS, app('hello'));
    const status = { desiredReplicas: 3, readyReplicas: 2, url: 'http://hello.default', lastScaling: { time: '2026-11-25T00:00:00Z', from: 2, to: 3, reason: 'PanicBurst', message: 'a burst' } };
    await call('PATCH', `${APPS}/hello/status`, { status }, 'application/merge-patch+json');

    const table = (await call('GET', `${APPS}?includeObject=Object`, undefined, undefined, TABLE)).body;
    expect(table.kind).toBe('Table');
    expect(table.columnDefinitions.map((c: { name: string }) => c.name)).toEqual(['Name', 'Desired', 'Ready', 'Scaling', 'URL', 'Age']);
    expect(table.rows).toHaveLength(1);
    expect(table.rows[0].cells.slice(0, 5)).toEqual(['hello', 3, 2, 'PanicBurst', 'http://hello.default']);
    expect(table.rows[0].cells[5]).toMatch(/^\d+s$/);
    expect(table.rows[0].object.spec.runtime).toBeDefined();

    const one = (await call('GET', `${APPS}/hello`, undefined, undefined, TABLE)).body;
    expect(one.rows[0].object).toMatchObject({ kind: 'PartialObjectMetadata', metadata: { name: 'hello' } });

    const namespaces = (await call('GET', '/api/v1/namespaces', undefined, undefined, TABLE)).body;
    expect(namespaces.columnDefinitions.map((c: { name: string }) => c.name)).toEqual(['Name', 'Age']);
    expect(namespaces.rows.map((r: { cells: unknown[] }) => r.cells[0])).toContain('default');
  });

  it('refuses a strategic merge patch of a custom resource with 415, as kube-apiserver does', async () => {
    await installCrds();
    await call('POST', APPS, app('hello'));
    const refused = await call('PATCH', `${APPS}/hello`, { metadata: { labels: { a: 'b' } } }, 'application/strategic-merge-patch+json');
    expect(refused.status).toBe(415);
    expect(refused.body).toMatchObject({
      reason: 'UnsupportedMediaType',
      code: 415,
      message:
        'the body of the request was in an unknown format - accepted media types include: ' +
        'application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml',
    });
    // Built-in kinds still take it.
    await call('POST', '/api/v1/namespaces/default/configmaps', { metadata: { name: 'c' } });
    const patched = await call('PATCH', '/api/v1/namespaces/default/configmaps/c', { data: { a: 'b' } }, 'application/strategic-merge-patch+json');
    expect(patched.status).toBe(200);
  });

  it('prunes fields outside the schema and fills in its defaults (for nulls too), keeping what preserves unknown fields', async () => {
    await installCrds();
    const spec = { runtime: { python: { code: { baked: true }, bogus: 1, module: null } }, bogus: 2 };
    const created = await call('POST', APPS, app('hello', { extra: 1, spec }));
    expect(created.status).toBe(201);
    expect(created.body.extra).toBeUndefined();
    expect(created.body.spec.bogus).toBeUndefined();
    expect(created.body.spec.runtime.python).toEqual({ code: { baked: true }, module: 'main' });
    expect(created.body.spec.scaling).toMatchObject({ minReplicas: 1, maxReplicas: 10 });
    expect(created.body.metadata.name).toBe('hello');

    const runLog = { apiVersion: 'runlet.dev/v1alpha1', kind: 'RunLog', metadata: { name: 'hello' }, spec: { appName: 'hello' } };
    await call('POST', '/apis/runlet.dev/v1alpha1/namespaces/default/runlogs', runLog);
    const runs = [{ id: 'r1', statusCode: null, error: null, status: null, unknown: 1 }];
    const withRuns = await call('PUT', '/apis/runlet.dev/v1alpha1/namespaces/default/runlogs/hello/status', { ...runLog, status: { runs } });
    expect(withRuns.body.status.runs).toEqual([{ id: 'r1', statusCode: null, error: null }]);

    const preserving = {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name: 'things.example.com' },
      spec: {
        group: 'example.com',
        names: { kind: 'Thing', plural: 'things' },
        scope: 'Namespaced',
        versions: [{
          name: 'v1',
          served: true,
          storage: true,
          schema: { openAPIV3Schema: { type: 'object', properties: { spec: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } } } },
        }],
      },
    };
    await call('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', preserving);
    const thing = await call('POST', '/apis/example.com/v1/namespaces/default/things', {
      apiVersion: 'example.com/v1', kind: 'Thing', metadata: { name: 't' }, spec: { any: { deep: 1 } }, other: true,
    });
    expect(thing.body.spec).toEqual({ any: { deep: 1 } });
    expect(thing.body.other).toBeUndefined();
  });

  it('answers a dry run of create, update, patch and apply as if written, and stores and announces nothing', async () => {
    await installCrds();
    const before = kube.server.resourceVersion;
    const created = await call('POST', `${APPS}?dryRun=All`, app('hello', { bogus: 1 }));
    expect(created.status).toBe(201);
    expect(created.body.spec.runtime.python.module).toBe('main');
    expect(created.body.bogus).toBeUndefined();
    expect(created.body.metadata.resourceVersion).toBeUndefined();
    expect((await call('GET', `${APPS}/hello`)).status).toBe(404);
    expect(kube.server.resourceVersion).toBe(before);

    const stored = (await call('POST', APPS, app('hello'))).body;
    const version = kube.server.resourceVersion;
    const scaled = { ...stored, spec: { ...stored.spec, scaling: { ...stored.spec.scaling, maxReplicas: 3 } } };
    expect((await call('PUT', `${APPS}/hello?dryRun=All`, scaled)).body.spec.scaling.maxReplicas).toBe(3);
    const patch = { spec: { scaling: { maxReplicas: 4 } } };
    expect((await call('PATCH', `${APPS}/hello?dryRun=All`, patch, 'application/merge-patch+json')).body.spec.scaling.maxReplicas).toBe(4);
    const applied = app('hello', { spec: { runtime: { python: { code: { baked: true } } }, scaling: { maxReplicas: 5 } } });
    const apply = await call('PATCH', `${APPS}/hello?dryRun=All&fieldManager=m&force=true`, applied, 'application/apply-patch+yaml');
    expect(apply.body.spec.scaling.maxReplicas).toBe(5);
    expect((await call('PATCH', `${APPS}/other?dryRun=All&fieldManager=m`, app('other'), 'application/apply-patch+yaml')).status).toBe(201);

    expect(kube.server.resourceVersion).toBe(version);
    expect((await call('GET', `${APPS}/hello`)).body).toEqual(stored);
    expect((await call('GET', `${APPS}/other`)).status).toBe(404);
    expect((await call('POST', `${APPS}?dryRun=true`, app('x'))).status).toBe(400);
  });
});
