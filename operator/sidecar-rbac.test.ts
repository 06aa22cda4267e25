import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { App } from '../crds/app-schema.ts';
import { startKubeApiServer, type KubeApiServer } from '../test/kube/index.ts';
import { pythonSpec, storedApp } from '../test/support/operator-apps.ts';
import { KubeApi } from '../kube/client.ts';
import type { KubeObject } from '../kube/objects.ts';
import { SidecarRbacApplier, type SidecarRbacApplierOptions } from './sidecar-rbac.ts';
import { kubePathOf } from '../test/support/kube-path.ts';

const RBAC = '/apis/rbac.authorization.k8s.io/v1/namespaces/team-a';
const BINDING = `${RBAC}/rolebindings/runlet-sidecar`;
const ACCOUNT = '/api/v1/namespaces/team-a/serviceaccounts/runlet-sidecar';

describe('the sidecar RBAC of a namespace', () => {
  let server: KubeApiServer | undefined;
  let api: KubeApi | undefined;
  afterEach(async () => {
    await api?.close();
    await server?.close();
  });

  async function start(apps: App[], holderKeys?: SidecarRbacApplierOptions['holderKeys']): Promise<{ applier: SidecarRbacApplier; server: KubeApiServer; api: KubeApi }> {
    server = await startKubeApiServer({ namespaces: ['team-a', 'team-b', 'runlet-system'] });
    api = new KubeApi(await server.credentials(), { fieldManager: 'runlet-operator' });
    const applier = new SidecarRbacApplier({ api, appsIn: (namespace) => apps.filter((app) => app.metadata.namespace === namespace), logger: pino({ level: 'silent' }), holderKeys });
    return { applier, server, api };
  }

  const ownerUids = async (path: string) => ((await api!.get(kubePathOf(path))).metadata?.ownerReferences ?? []).map((ref) => ref.uid);

  it('is owned by every App of the namespace, applied again only when they change', async () => {
    const apps = [storedApp(pythonSpec(), { name: 'one', uid: 'uid-1' })];
    const { applier, server } = await start(apps);

    await applier.ensure('team-a');
    expect(await ownerUids(ACCOUNT)).toEqual(['uid-1']);
    expect(await ownerUids(BINDING)).toEqual(['uid-1']);
    const writes = () => server.countRequests({ method: 'PATCH' });
    const before = writes();
    await applier.ensure('team-a');
    expect(writes(), 'nothing sent for the same Apps').toBe(before);

    apps.push(storedApp(pythonSpec(), { name: 'two', uid: 'uid-2' }));
    await applier.ensure('team-a');
    expect(await ownerUids(ACCOUNT)).toEqual(['uid-1', 'uid-2']);
    expect(await ownerUids(BINDING)).toEqual(['uid-1', 'uid-2']);
  });

  it('applies nothing in a namespace without Apps (the garbage collector would delete it at once)', async () => {
    const { applier, server } = await start([]);
    await applier.ensure('team-a');
    expect(server.countRequests({ method: 'PATCH' })).toBe(0);
  });

  it('applies the latest owners last when ensures overlap', async () => {
    const apps = [storedApp(pythonSpec(), { name: 'one', uid: 'uid-1' })];
    const { applier } = await start(apps);
    const first = applier.ensure('team-a');
    apps.push(storedApp(pythonSpec(), { name: 'two', uid: 'uid-2' }));
    await Promise.all([first, applier.ensure('team-a')]);
    expect(await ownerUids(BINDING)).toEqual(['uid-1', 'uid-2']);
  });

  it('replaces the binding of an earlier version to its own Role (a roleRef cannot change) and deletes that Role', async () => {
    const { applier, api } = await start([storedApp(pythonSpec(), { name: 'one', uid: 'uid-1' })]);
    await api.create(kubePathOf(`${RBAC}/roles`), { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: { name: 'runlet-sidecar' }, rules: [] } as KubeObject);
    const old = await api.create(kubePathOf(`${RBAC}/rolebindings`), {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: 'runlet-sidecar' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'runlet-sidecar' },
      subjects: [{ kind: 'ServiceAccount', name: 'runlet-sidecar', namespace: 'team-a' }],
    } as KubeObject);

    await applier.ensure('team-a');
    const binding = await api.get<KubeObject & { roleRef: unknown }>(kubePathOf(BINDING));
    expect(binding.metadata?.uid).not.toBe(old.metadata?.uid);
    expect(binding.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'runlet-sidecar' });
    expect(await api.find(kubePathOf(`${RBAC}/roles/runlet-sidecar`))).toBeUndefined();
  });

  it('is repaired when deleted or drifted while an App is left, not when the last App is gone', async () => {
    const apps = [storedApp(pythonSpec(), { name: 'one', uid: 'uid-1' })];
    const { applier, api } = await start(apps);
    await applier.ensure('team-a');
    const binding = await api.get(kubePathOf(BINDING));
    expect(applier.needsRepair('RoleBinding', binding, false), 'as applied').toBe(false);

    await api.delete(kubePathOf(BINDING));
    expect(applier.needsRepair('RoleBinding', binding, true)).toBe(true);
    await applier.ensure('team-a');
    expect(await api.find(kubePathOf(BINDING)), 'applied again').toBeDefined();

    expect(applier.needsRepair('ServiceAccount', { metadata: { name: 'runlet-sidecar', namespace: 'team-a', labels: {} } }, false), 'its labels gone').toBe(true);
    apps.pop();
    expect(applier.needsRepair('RoleBinding', binding, true), 'no App left').toBe(false);
  });

  describe('with a holder: the namespace’s hand-over key', () => {
    const COPY = '/api/v1/namespaces/team-a/secrets/runlet-holder-key';
    const keyIn = async (path: string) => Buffer.from((await api!.get<KubeObject & { data?: Record<string, string> }>(kubePathOf(path))).data!.key!, 'base64').toString('utf8');

    it('is random for each namespace, derived from nothing, applied beside the ServiceAccount and RoleBinding, as hex text, owned by every App of the namespace', async () => {
      const apps = [storedApp(pythonSpec(), { name: 'one', uid: 'uid-1' }), storedApp(pythonSpec(), { name: 'two', uid: 'uid-2' }), storedApp(pythonSpec(), { name: 'b', namespace: 'team-b', uid: 'uid-b' })];
      const { applier } = await start(apps, true);
      await applier.ensure('team-a');
      await applier.ensure('team-b');
      const teamA = await keyIn(COPY);
      expect(teamA).toMatch(/^[0-9a-f]{64}$/);
      expect(await keyIn(COPY.replace('team-a', 'team-b'))).not.toBe(teamA);
      expect(await ownerUids(COPY)).toEqual(['uid-1', 'uid-2']);
    });

    it('is kept as the namespace has it, by another operator and as Apps come: an earlier version’s key keeps working', async () => {
      const apps = [storedApp(pythonSpec(), { name: 'one', uid: 'uid-1' })];
      const { applier } = await start(apps, true);
      await api!.create(kubePathOf('/api/v1/namespaces/team-a/secrets'), { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'runlet-holder-key', namespace: 'team-a' }, data: { key: Buffer.from('ab'.repeat(32)).toString('base64') } } as KubeObject);
      await applier.ensure('team-a');
      apps.push(storedApp(pythonSpec(), { name: 'two', uid: 'uid-2' }));
      await applier.ensure('team-a');
      expect(await keyIn(COPY)).toBe('ab'.repeat(32));
      expect(await ownerUids(COPY)).toEqual(['uid-1', 'uid-2']);
    });

    it('is not made without a holder', async () => {
      const { applier } = await start([storedApp(pythonSpec(), { name: 'one', uid: 'uid-1' })]);
      await applier.ensure('team-a');
      expect(await api!.find(kubePathOf(COPY))).toBeUndefined();
    });
  });
});
