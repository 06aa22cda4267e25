import { describe, expect, it } from 'vitest';
import { pythonSpec, storedApp } from '../../test/support/operator-apps.ts';
import { appLabels, childMetadata, owningAppName, selectorLabels } from './labels.ts';

describe('child metadata', () => {
  const app = storedApp(pythonSpec(), { name: 'hello', namespace: 'team-a', uid: 'u-1' });

  it('labels every child with the app name and the manager', () => {
    expect(appLabels(app)).toEqual({
      'app.kubernetes.io/name': 'hello',
      'app.kubernetes.io/managed-by': 'runlet',
      'runlet.dev/app': 'hello',
    });
    expect(selectorLabels(app)).toEqual({ 'runlet.dev/app': 'hello' });
  });

  it('makes the App the controlling owner, blocking its deletion until the child is gone', () => {
    expect(childMetadata(app, 'hello')).toEqual({
      name: 'hello',
      namespace: 'team-a',
      labels: appLabels(app),
      ownerReferences: [{ apiVersion: 'runlet.dev/v1alpha1', kind: 'App', name: 'hello', uid: 'u-1', controller: true, blockOwnerDeletion: true }],
    });
  });

  it('refuses an App without uid (not stored yet)', () => {
    expect(() => childMetadata(storedApp(pythonSpec(), { uid: '' }), 'hello')).toThrow(/no uid/);
  });

  it.each([
    ['its controlling App', [{ apiVersion: 'runlet.dev/v1alpha1', kind: 'App', name: 'hello', uid: 'u', controller: true }], 'hello'],
    ['no App when the App reference is not the controller', [{ apiVersion: 'runlet.dev/v1alpha1', kind: 'App', name: 'hello', uid: 'u' }], undefined],
    ['no App when another kind controls it', [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'rs', uid: 'u', controller: true }], undefined],
    ['no App without owners', undefined, undefined],
  ])('a child names %s', (_case, ownerReferences, name) => {
    expect(owningAppName({ metadata: { ownerReferences } })).toBe(name);
  });
});
