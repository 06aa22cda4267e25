import { describe, expect, it } from 'vitest';
import { pythonSpec, storedApp } from '../../test/support/operator-apps.ts';
import { appPort, appUrl, runPathPrefix } from './names.ts';

const custom = { runtime: { custom: { image: 'web:1', port: 8080 } } };

describe('appUrl', () => {
  const app = storedApp(pythonSpec(), { name: 'hello', namespace: 'team-a' });
  it.each([
    ['no ingress: the cluster DNS name', null, 'http://hello.team-a.svc.cluster.local/v4/team-a/hello'],
    ['ingress without host: still cluster-local', { className: 'nginx' }, 'http://hello.team-a.svc.cluster.local/v4/team-a/hello'],
    ['ingress host over HTTP', { host: 'apps.example' }, 'http://apps.example/v4/team-a/hello'],
    ['ingress host with TLS', { host: 'apps.example', tls: true }, 'https://apps.example/v4/team-a/hello'],
    ['a host per namespace', { host: '{namespace}.apps.example', tls: true }, 'https://team-a.apps.example/v4/team-a/hello'],
  ])('%s', (_case, ingress, url) => {
    expect(appUrl(app, ingress)).toBe(url);
  });
});

describe('ports and paths', () => {
  it.each([
    ['python', pythonSpec(), 8192],
    ['custom', custom, 8080],
  ])('the %s app container port', (_case, spec, port) => {
    expect(appPort(storedApp(spec).spec)).toBe(port);
  });

  it('prefixes runs with /v4/<namespace>/<app>', () => {
    expect(runPathPrefix(storedApp(pythonSpec(), { name: 'x', namespace: 'p' }))).toBe('/v4/p/x');
  });
});
