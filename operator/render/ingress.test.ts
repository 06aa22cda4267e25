import { describe, expect, it } from 'vitest';
import { resolveConfig, type IngressConfig } from '../config.ts';
import { pythonSpec, storedApp } from '../../test/support/operator-apps.ts';
import { renderIngress } from './ingress.ts';

const app = storedApp(pythonSpec(), { name: 'hello', namespace: 'team-a' });
const images = { sidecarImage: 'runlet/runlet:1', pythonRuntimeImage: 'runlet/python-runtime:1' };
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

  it('puts each namespace on a host of its own when the host names {namespace}', () => {
    const config = { host: '{namespace}.apps.example', tls: true, tlsSecretName: 'apps-tls' };
    const other = storedApp(pythonSpec(), { name: 'hello', namespace: 'team-b' });
    expect(renderIngress(app, config).spec?.rules?.[0]?.host).toBe('team-a.apps.example');
    expect(renderIngress(app, config).spec?.tls).toEqual([{ hosts: ['team-a.apps.example'], secretName: 'apps-tls' }]);
    expect(renderIngress(other, config).spec?.rules?.[0]?.host).toBe('team-b.apps.example');
  });

  it.each(['apps.example', '*.apps.example', '{namespace}.apps.example', 'runs.{namespace}.example'])('takes the host %s', (host) => {
    expect(resolveConfig(images, { ingress: { host } }).ingress?.host).toBe(host);
  });

  it.each(['Apps.example', 'apps..example', '{ns}.apps.example', 'x{namespace}.example', 'apps.example/path', '-a.example'])(
    'refuses the host %s, naming the setting',
    (host) => {
      expect(() => resolveConfig(images, { ingress: { host } })).toThrow(/ingress\.host: Expected string to match/);
    },
  );

  it('is owned by the App and carries the configured annotations', () => {
    const ingress = renderIngress(app, { annotations: { 'nginx.ingress.kubernetes.io/proxy-read-timeout': '3600' } });
    expect(ingress.metadata?.name).toBe('hello');
    expect(ingress.metadata?.annotations).toEqual({ 'nginx.ingress.kubernetes.io/proxy-read-timeout': '3600' });
    expect(ingress.metadata?.ownerReferences?.[0]?.kind).toBe('App');
  });
});
