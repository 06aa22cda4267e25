import { describe, expect, it } from 'vitest';
import { DRAIN_TOKEN, pythonSpec, renderConfig, storedApp } from '../../test/support/operator-apps.ts';
import { renderAppChildren } from './app-children.ts';

describe('renderAppChildren', () => {
  const app = storedApp(pythonSpec(), { name: 'hello', namespace: 'team-a' });

  it.each([
    ['ingress configured: Deployment, Service and Ingress', { className: 'nginx' }, ['Deployment', 'Service', 'Ingress'], []],
    ['no ingress: no Ingress, and an old one removed', null, ['Deployment', 'Service'], ['Ingress']],
  ])('%s', (_case, ingress, applied, removed) => {
    const children = renderAppChildren(app, renderConfig({ ingress }), { codeHash: undefined, drainToken: DRAIN_TOKEN });
    expect(children.apply.map((child) => child.kind)).toEqual(applied);
    expect(children.remove.map((ref) => ref.kind)).toEqual(removed);
    for (const ref of children.remove) expect(ref).toMatchObject({ namespace: 'team-a', name: 'hello' });
  });
});
