import { describe, expect, it } from 'vitest';
import type { IngressConfig } from '../config.ts';
import { pythonSpec, storedApp } from '../../test/support/operator-apps.ts';
import { renderIngress } from './ingress.ts';

const app = storedApp(pythonSpec(), { name: 'hello', namespace: 'team-a' });
const path = { path: '/v4/team-a/hello', pathType: 'Prefix', backend: { service: { name: 'hello', port: { name: 'http' } } } };

describe('renderIngress', () => {
  it.each<[string, IngressConfig, Record<string, unknown>]>([
    ['class and host', { className: 'nginx', host: 'apps.example' }, { ingressClassName: 'nginx', rules: [{ host: 'apps.example', http: { paths: [path] } }] }],
    ['no host: any host', {}, { rules: [{ http: { paths: [path] } }] }],
    [
      'TLS with a certificate Secret',
      { host: 'apps.example', tls: true, tlsSecretName: 'apps-tls' },
      { tls: [{ hosts: ['apps.example'], secretName: 'apps-tls' }], rules: [{ host: 'apps.example', http: { paths: [path] } }] },
    ],
    [
      "TLS with the controller's default certificate",
      { host: 'apps.example', tls: true },
      { tls: [{ hosts: ['apps.example'] }], rules: [{ host: 'apps.example', http: { paths: [path] } }] },
    ],
  ])('%s', (_case, config, spec) => {
    expect(renderIngress(app, config).spec).toEqual(spec);
  });

  it('is owned by the App and carries the configured annotations', () => {
    const ingress = renderIngress(app, { annotations: { 'nginx.ingress.kubernetes.io/proxy-read-timeout': '3600' } });
    expect(ingress.metadata?.name).toBe('hello');
    expect(ingress.metadata?.annotations).toEqual({ 'nginx.ingress.kubernetes.io/proxy-read-timeout': '3600' });
    expect(ingress.metadata?.ownerReferences?.[0]?.kind).toBe('App');
  });
});
