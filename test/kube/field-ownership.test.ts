// Field ownership as kube-apiserver 1.20 records and enforces it (messages compared with the control-plane
// tier): creates, updates and patches record an Update manager owning the fields they set, and an apply
// that changes such a field conflicts with it unless forced.

import { describe, expect, it } from 'vitest';
import { serverPerTest } from './test-helpers.ts';

const kube = serverPerTest(() => ({}));
const MAPS = '/api/v1/namespaces/default/configmaps';

interface Entry {
  manager: string;
  operation: string;
  apiVersion: string;
  fieldsV1: object;
}

async function call(method: string, path: string, body: unknown, contentType = 'application/json') {
  const response = await kube.server.fetch(path, { method, headers: { 'content-type': contentType, 'user-agent': 'writer-tool/1.0 (linux)' }, body: JSON.stringify(body) });
  return { status: response.status, body: (await response.json()) as { metadata: { managedFields?: Entry[] }; data?: object; message?: string; reason?: string; details?: object } };
}

const configMap = (data: Record<string, string>, labels?: Record<string, string>) => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name: 'c', ...(labels ? { labels } : {}) },
  data,
});
const apply = (body: unknown, query = '') => call('PATCH', `${MAPS}/c?fieldManager=applier${query}`, body, 'application/apply-patch+yaml');

describe('field ownership of non-apply writes', () => {
  it('records an Update manager (fieldManager, else the User-Agent) owning what a write set or changed', async () => {
    const created = await call('POST', MAPS, configMap({ a: '1', b: '2' }));
    expect(created.body.metadata.managedFields).toEqual([
      expect.objectContaining({ manager: 'writer-tool', operation: 'Update', apiVersion: 'v1', fieldsV1: { 'f:data': { 'f:a': {}, 'f:b': {} } } }),
    ]);
    const patched = await call('PATCH', `${MAPS}/c?fieldManager=patcher`, { data: { b: '3' } }, 'application/merge-patch+json');
    expect(patched.body.metadata.managedFields?.map((e) => [e.manager, e.fieldsV1])).toEqual([
      ['writer-tool', { 'f:data': { 'f:a': {} } }],
      ['patcher', { 'f:data': { 'f:b': {} } }],
    ]);
  });

  it('refuses an apply that changes fields an Update manager owns, with the real server’s Status, unless forced', async () => {
    await call('POST', `${MAPS}?fieldManager=writer`, configMap({ a: '1', b: '2' }, { x: '1' }));

    const one = await apply(configMap({ a: 'changed' }));
    expect(one.status).toBe(409);
    expect(one.body).toMatchObject({
      reason: 'Conflict',
      message: 'Apply failed with 1 conflict: conflict with "writer" using v1: .data.a',
      details: { causes: [{ reason: 'FieldManagerConflict', message: 'conflict with "writer" using v1', field: '.data.a' }] },
    });
    const two = await apply(configMap({ a: 'changed', b: '2' }, { x: '2' }));
    expect(two.body.message).toBe('Apply failed with 2 conflicts: conflicts with "writer" using v1:\n- .data.a\n- .metadata.labels.x');

    // The same value is no conflict: both own it.
    expect((await apply(configMap({ a: '1' }))).status).toBe(200);
    const forced = await apply(configMap({ a: 'changed' }), '&force=true');
    expect(forced.status).toBe(200);
    expect(forced.body.data).toEqual({ a: 'changed', b: '2' });
    const owners = Object.fromEntries(forced.body.metadata.managedFields!.map((e) => [e.manager, e.fieldsV1]));
    expect(owners).toEqual({ writer: { 'f:data': { 'f:b': {} }, 'f:metadata': { 'f:labels': { 'f:x': {} } } }, applier: { 'f:data': { 'f:a': {} } } });
  });

  it('takes a field from its applier when an update changes it, so the applier then conflicts', async () => {
    await apply(configMap({ a: '1' }));
    await call('PATCH', `${MAPS}/c?fieldManager=editor`, { data: { a: '2' } }, 'application/merge-patch+json');
    const conflict = await apply(configMap({ a: '1' }));
    expect(conflict.status).toBe(409);
    expect(conflict.body.message).toBe('Apply failed with 1 conflict: conflict with "editor" using v1: .data.a');
  });
});

describe('apply of associative lists', () => {
  it('refuses a Service port or a container port without protocol (a list key 1.20 defaults only later), in the real server’s words', async () => {
    const service = { apiVersion: 'v1', kind: 'Service', metadata: { name: 's' }, spec: { ports: [{ name: 'http', port: 80 }] } };
    const refused = await call('PATCH', '/api/v1/namespaces/default/services/s?fieldManager=applier', service, 'application/apply-patch+yaml');
    expect(refused.status).toBe(500);
    // As kube-apiserver 1.20 answered the control-plane tier's harness.
    expect(refused.body.message).toBe(
      'failed to create typed patch object: .spec.ports: element 0: associative list with keys has an element that omits key field "protocol" (and doesn\'t have default value)',
    );
    const withProtocol = { ...service, spec: { ports: [{ name: 'http', port: 80, protocol: 'TCP' }] } };
    expect((await call('PATCH', '/api/v1/namespaces/default/services/s?fieldManager=applier', withProtocol, 'application/apply-patch+yaml')).status).toBe(201);

    const container = { name: 'app', image: 'app:1', ports: [{ containerPort: 8000, protocol: 'TCP' }, { containerPort: 8001 }] };
    const deployment = {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'd' },
      spec: { selector: { matchLabels: { app: 'd' } }, template: { metadata: { labels: { app: 'd' } }, spec: { containers: [container] } } },
    };
    const refusedDeployment = await call('PATCH', '/apis/apps/v1/namespaces/default/deployments/d?fieldManager=applier', deployment, 'application/apply-patch+yaml');
    expect(refusedDeployment.status).toBe(500);
    expect(refusedDeployment.body.message).toContain('.spec.template.spec.containers[name="app"].ports: element 1: associative list with keys has an element that omits key field "protocol"');
  });
});
