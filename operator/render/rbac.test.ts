import { describe, expect, it } from 'vitest';
import { renderSidecarRbac } from './rbac.ts';

describe('renderSidecarRbac', () => {
  const [account, role, binding] = renderSidecarRbac('team-a');

  it('names one ServiceAccount, Role and RoleBinding per namespace, owned by no App', () => {
    for (const object of [account, role, binding]) {
      expect(object.metadata?.name).toBe('runlet-sidecar');
      expect(object.metadata?.namespace).toBe('team-a');
      expect(object.metadata?.ownerReferences).toBeUndefined();
      expect(object.metadata?.labels?.['app.kubernetes.io/managed-by']).toBe('runlet');
    }
    expect([account.kind, role.kind, binding.kind]).toEqual(['ServiceAccount', 'Role', 'RoleBinding']);
  });

  it('allows RunLog writes and reading Apps (the RunLog owner’s uid), nothing else', () => {
    expect(role.rules).toEqual([
      { apiGroups: ['runlet.dev'], resources: ['runlogs', 'runlogs/status'], verbs: ['get', 'list', 'watch', 'create', 'update', 'patch'] },
      { apiGroups: ['runlet.dev'], resources: ['apps'], verbs: ['get'] },
    ]);
  });

  it('binds the Role to the ServiceAccount of the same namespace', () => {
    expect(binding.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'runlet-sidecar' });
    expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name: 'runlet-sidecar', namespace: 'team-a' }]);
  });
});
