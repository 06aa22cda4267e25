import { describe, expect, it } from 'vitest';
import { storedApp, pythonSpec } from '../../test/support/operator-apps.ts';
import { renderSidecarRbac, sidecarRbacDrifted } from './rbac.ts';

describe('renderSidecarRbac', () => {
  const first = storedApp(pythonSpec(), { name: 'hello', namespace: 'team-a', uid: 'uid-b' });
  const second = storedApp(pythonSpec(), { name: 'other', namespace: 'team-a', uid: 'uid-a' });
  const [account, binding] = renderSidecarRbac('team-a', [first, second]);

  it('names one ServiceAccount and RoleBinding per namespace, owned by every App there (none as controller), in uid order', () => {
    for (const object of [account, binding]) {
      expect(object.metadata?.name).toBe('runlet-sidecar');
      expect(object.metadata?.namespace).toBe('team-a');
      expect(object.metadata?.ownerReferences).toEqual([
        { apiVersion: 'runlet.dev/v1alpha1', kind: 'App', name: 'other', uid: 'uid-a' },
        { apiVersion: 'runlet.dev/v1alpha1', kind: 'App', name: 'hello', uid: 'uid-b' },
      ]);
      expect(object.metadata?.labels).toEqual({ 'app.kubernetes.io/managed-by': 'runlet', 'app.kubernetes.io/component': 'sidecar' });
    }
    expect([account.kind, binding.kind]).toEqual(['ServiceAccount', 'RoleBinding']);
  });

  it('binds the chart’s ClusterRole to the ServiceAccount of the same namespace', () => {
    expect(binding.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'runlet-sidecar' });
    expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name: 'runlet-sidecar', namespace: 'team-a' }]);
  });

  it('refuses an App that was never stored: it has no uid to be referenced by', () => {
    expect(() => renderSidecarRbac('team-a', [storedApp(pythonSpec(), { uid: '' })])).toThrow(/no uid/);
  });
});

describe('sidecarRbacDrifted', () => {
  const app = storedApp(pythonSpec(), { name: 'hello', namespace: 'team-a', uid: 'uid-a' });
  const [, binding] = renderSidecarRbac('team-a', [app]);
  const served = () => structuredClone({ metadata: binding.metadata!, roleRef: { name: 'runlet-sidecar', kind: 'ClusterRole', apiGroup: 'rbac.authorization.k8s.io' }, subjects: binding.subjects });

  it('is false for what was applied, whatever order the server answers the fields in, and for an owner the garbage collector has yet to drop', () => {
    expect(sidecarRbacDrifted(served(), binding)).toBe(false);
    const withGoneOwner = served();
    withGoneOwner.metadata.ownerReferences!.push({ apiVersion: 'runlet.dev/v1alpha1', kind: 'App', name: 'gone', uid: 'uid-z' });
    expect(sidecarRbacDrifted(withGoneOwner, binding)).toBe(false);
  });

  it.each([
    ['an App missing among the owners', (object: ReturnType<typeof served>) => (object.metadata.ownerReferences = [])],
    ['another subject', (object: ReturnType<typeof served>) => (object.subjects = [{ kind: 'ServiceAccount', name: 'default', namespace: 'team-a' }])],
    ['a label changed', (object: ReturnType<typeof served>) => (object.metadata.labels = { ...object.metadata.labels, 'app.kubernetes.io/component': 'x' })],
  ])('is true for %s', (_what, change) => {
    const object = served();
    change(object);
    expect(sidecarRbacDrifted(object, binding)).toBe(true);
  });
});
