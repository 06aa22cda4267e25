// The fake API server's RBAC authorizer (option `rbac`): bindings decide, per namespace, with the real 403.
import { afterEach, describe, expect, it } from 'vitest';
import { KubeApi } from '../../kube/client.ts';
import { KubeApiError } from '../../kube/errors.ts';
import { resourcePath, type KubeObject } from '../../kube/objects.ts';
import { kubeConfigCredentials } from '../../kube/kubeconfig.ts';
import { startKubeApiServer, type KubeApiServer } from './index.ts';

const RBAC = 'rbac.authorization.k8s.io/v1';
const USER = 'system:serviceaccount:runlet-system:runlet-operator';

describe('RBAC of the fake API server', () => {
  let server: KubeApiServer | undefined;
  const clients: KubeApi[] = [];
  afterEach(async () => {
    for (const client of clients.splice(0)) await client.close();
    await server?.close();
  });

  async function start(): Promise<{ admin: KubeApi; operator: KubeApi }> {
    server = await startKubeApiServer({ rbac: true, namespaces: ['runlet-system', 'team-a', 'team-b', 'kube-system'] });
    const admin = new KubeApi(await server.credentials());
    server.tokens.set('operator-token', { username: USER, groups: ['system:serviceaccounts', 'system:authenticated'] });
    const operator = new KubeApi(kubeConfigCredentials(server.kubeConfig({ token: 'operator-token' })), { fieldManager: 'test' });
    clients.push(admin, operator);
    await admin.create(resourcePath({ apiVersion: RBAC, kind: 'ClusterRole' }), {
      apiVersion: RBAC,
      kind: 'ClusterRole',
      metadata: { name: 'writer' },
      rules: [
        { apiGroups: [''], resources: ['configmaps'], verbs: ['create', 'patch'] },
        { apiGroups: ['rbac.authorization.k8s.io'], resources: ['rolebindings'], verbs: ['create'] },
      ],
    } as KubeObject);
    await admin.create(resourcePath({ apiVersion: RBAC, kind: 'ClusterRole' }), { apiVersion: RBAC, kind: 'ClusterRole', metadata: { name: 'powerful' }, rules: [{ apiGroups: ['*'], resources: ['*'], verbs: ['*'] }] } as KubeObject);
    await admin.create(resourcePath({ apiVersion: RBAC, kind: 'RoleBinding', namespace: 'team-a' }), {
      apiVersion: RBAC,
      kind: 'RoleBinding',
      metadata: { name: 'writer' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'writer' },
      subjects: [{ kind: 'ServiceAccount', name: 'runlet-operator', namespace: 'runlet-system' }],
    } as KubeObject);
    return { admin, operator };
  }

  const configMap = (namespace: string, name: string) => ({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace }, data: { a: '1' } });
  const refusal = (promise: Promise<unknown>) => promise.then(() => undefined, (error: unknown) => error as KubeApiError);

  it('allows a RoleBinding’s rules in its namespace only, and refuses elsewhere with the real 403', async () => {
    const { operator } = await start();
    await operator.apply(configMap('team-a', 'allowed'));
    const refused = await refusal(operator.apply(configMap('team-b', 'refused')));
    expect(refused?.status).toBe(403);
    expect(refused?.message).toContain(`configmaps "refused" is forbidden: User "${USER}" cannot patch resource "configmaps" in API group "" in the namespace "team-b"`);
    // Reads were not granted either, and the test's own credential is not checked.
    expect((await refusal(operator.list(resourcePath({ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'team-a' }))))?.status).toBe(403);
  });

  it('needs create for a server-side apply only when the object is missing', async () => {
    const { admin, operator } = await start();
    await admin.create(resourcePath({ apiVersion: RBAC, kind: 'ClusterRole' }), { apiVersion: RBAC, kind: 'ClusterRole', metadata: { name: 'patcher' }, rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['patch'] }] } as KubeObject);
    await admin.create(resourcePath({ apiVersion: RBAC, kind: 'RoleBinding', namespace: 'team-b' }), {
      apiVersion: RBAC,
      kind: 'RoleBinding',
      metadata: { name: 'patcher' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'patcher' },
      subjects: [{ kind: 'ServiceAccount', name: 'runlet-operator', namespace: 'runlet-system' }],
    } as KubeObject);
    expect((await refusal(operator.apply(configMap('team-b', 'new'))))?.message).toContain('cannot create resource "configmaps"');
    await admin.create(resourcePath({ apiVersion: 'v1', kind: 'ConfigMap', namespace: 'team-b' }), configMap('team-b', 'there'));
    await operator.apply(configMap('team-b', 'there'));
  });

  it('refuses a binding that grants more than its writer holds, unless it may bind the role', async () => {
    const { operator } = await start();
    const binding = (role: string) =>
      ({
        apiVersion: RBAC,
        kind: 'RoleBinding',
        metadata: { name: `to-${role}`, namespace: 'team-a' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
        subjects: [{ kind: 'User', name: 'mallory' }],
      }) as KubeObject;
    const escalation = await refusal(operator.create(resourcePath({ apiVersion: RBAC, kind: 'RoleBinding', namespace: 'team-a' }), binding('powerful')));
    expect(escalation?.message).toContain('is attempting to grant RBAC permissions not currently held');
    // What it holds itself it may grant.
    await operator.create(resourcePath({ apiVersion: RBAC, kind: 'RoleBinding', namespace: 'team-a' }), binding('writer'));
  });
});
