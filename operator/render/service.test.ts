import { describe, expect, it } from 'vitest';
import { pythonSpec, storedApp } from '../../test/support/operator-apps.ts';
import { replicasServiceName } from './names.ts';
import { renderReplicasService, renderService } from './service.ts';

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

describe('renderReplicasService', () => {
  it('is headless, with the App’s selector and ready pods only: Kubernetes’ endpoints controller lists its replicas for the activator', () => {
    const service = renderReplicasService(storedApp({ ...pythonSpec(), scaling: { minReplicas: 0, maxReplicas: 3 } }, { name: 'hello', namespace: 'team-a' }));
    expect(service.metadata).toMatchObject({ name: replicasServiceName('hello'), namespace: 'team-a', labels: { 'runlet.dev/app': 'hello', 'app.kubernetes.io/managed-by': 'runlet' } });
    expect(service.metadata?.ownerReferences).toMatchObject([{ kind: 'App', name: 'hello', controller: true }]);
    expect(service.spec).toEqual({
      type: 'ClusterIP',
      clusterIP: 'None',
      selector: { 'runlet.dev/app': 'hello' },
      publishNotReadyAddresses: false,
      ports: [{ name: 'http', port: 8000, targetPort: 8000, protocol: 'TCP' }],
    });
  });

  it('is named apart from any App’s own Service, within a DNS label for the longest App name', () => {
    expect(replicasServiceName('hello')).toMatch(/^hello-replicas-[0-9a-f]{4}$/);
    expect(replicasServiceName('hello-replicas')).not.toBe(replicasServiceName('hello'));
    const longest = 'a'.repeat(63);
    expect(replicasServiceName(longest)).toHaveLength(63);
    expect(replicasServiceName(longest)).toMatch(/^[a-z]([-a-z0-9]*[a-z0-9])?$/);
    expect(replicasServiceName(longest)).not.toBe(replicasServiceName(`${'a'.repeat(62)}b`));
  });
});
