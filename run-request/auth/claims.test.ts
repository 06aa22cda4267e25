import { describe, expect, it } from 'vitest';
import { projectOfClaims } from './claims.ts';

describe('projectOfClaims', () => {
  it('takes project_id first', () => {
    expect(projectOfClaims({ project_id: 'team-a', sub: 'system:serviceaccount:other:caller' })).toBe('team-a');
  });

  it('takes the namespace of a service-account token from its kubernetes.io claim', () => {
    expect(projectOfClaims({ 'kubernetes.io': { namespace: 'ml-prod' }, sub: 'system:serviceaccount:ml-prod:caller' })).toBe('ml-prod');
  });

  it('falls back to the namespace in a service-account subject', () => {
    expect(projectOfClaims({ sub: 'system:serviceaccount:ml-dev:caller' })).toBe('ml-dev');
  });

  it('names no project for other or malformed claims', () => {
    for (const claims of [
      {},
      { sub: 'alice' },
      { sub: 'system:serviceaccount:' },
      { sub: 'system:serviceaccount:ns' },
      { sub: 'system:serviceaccount::name' },
      { sub: 'system:serviceaccount:ns:' },
      { sub: 'system:serviceaccount:ns:name:extra' },
      { project_id: '' },
      { project_id: 42 },
      { project_id: ['team-a'] },
      { 'kubernetes.io': { namespace: 7 }, sub: 'system:serviceaccount:ns:name' },
      { 'kubernetes.io': null, sub: 'alice' },
    ]) {
      expect(projectOfClaims(claims), JSON.stringify(claims)).toBeNull();
    }
  });
});
