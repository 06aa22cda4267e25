import { afterEach, describe, expect, it } from 'vitest';
import { startKubeApiServer, type KubeApiServer } from '../test/kube/index.ts';
import { KubeApi } from '../kube/client.ts';
import { SIDECAR_ROLE } from './render/names.ts';
import { SidecarRbacApplier } from './sidecar-rbac.ts';

describe('the sidecar RBAC of a namespace', () => {
  let server: KubeApiServer | undefined;
  let api: KubeApi | undefined;
  afterEach(async () => {
    await api?.close();
    await server?.close();
  });

  it('sends the RoleBinding only once its Role is applied (a real server refuses a binding to a Role it cannot find)', async () => {
    server = await startKubeApiServer();
    api = new KubeApi(await server.credentials(), { fieldManager: 'runlet-operator' });
    await api.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'team-a' } });
    const applier = new SidecarRbacApplier(api);
    server.failNext({ method: 'PATCH', pathPattern: `/namespaces/team-a/roles/${SIDECAR_ROLE}`, status: 500, message: 'etcd unavailable' });

    await expect(applier.ensure('team-a')).rejects.toThrow(/500/);
    expect(await api.find(`/apis/rbac.authorization.k8s.io/v1/namespaces/team-a/rolebindings/${SIDECAR_ROLE}`), 'no binding was sent').toBeUndefined();

    await applier.ensure('team-a');
    expect(await api.find(`/apis/rbac.authorization.k8s.io/v1/namespaces/team-a/roles/${SIDECAR_ROLE}`)).toBeDefined();
    expect(await api.find(`/apis/rbac.authorization.k8s.io/v1/namespaces/team-a/rolebindings/${SIDECAR_ROLE}`)).toBeDefined();
  });
});
