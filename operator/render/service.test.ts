import { describe, expect, it } from 'vitest';
import { pythonSpec, storedApp } from '../../test/support/operator-apps.ts';
import { renderService } from './service.ts';

describe('renderService', () => {
  it.each([
    ['python', pythonSpec()],
    ['custom (never its own port)', { runtime: { custom: { image: 'web:1', port: 3000 } } }],
  ])('%s: port 80 named http to the sidecar run port 8000', (_case, spec) => {
    const service = renderService(storedApp(spec, { name: 'hello', namespace: 'team-a' }));
    expect(service.metadata).toMatchObject({ name: 'hello', namespace: 'team-a' });
    expect(service.metadata?.ownerReferences).toHaveLength(1);
    expect(service.spec).toEqual({
      type: 'ClusterIP',
      selector: { 'runlet.dev/app': 'hello' },
      ports: [{ name: 'http', port: 80, targetPort: 8000, protocol: 'TCP' }],
    });
  });
});

describe('renderService of an App that scales to zero', () => {
  it('has no selector: the operator writes its Endpoints', () => {
    const service = renderService(storedApp({ ...pythonSpec(), scaling: { minReplicas: 0, maxReplicas: 3 } }, { name: 'hello', namespace: 'team-a' }));
    expect(service.spec?.selector).toBeUndefined();
    expect(service.spec?.ports).toEqual([{ name: 'http', port: 80, targetPort: 8000, protocol: 'TCP' }]);
  });
});
