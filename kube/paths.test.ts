// The one path builder: every segment encoded, none empty, `.` or `..` — whatever a name holds, it stays one
// segment of the path it was put in.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { KubePath } from './paths.ts';

const accounts = KubePath.of({ version: 'v1', namespace: 'team-a', resource: 'serviceaccounts' });

describe('KubePath', () => {
  it('builds core, group, namespaced, cluster, named and subresource paths', () => {
    expect(accounts.toString()).toBe('/api/v1/namespaces/team-a/serviceaccounts');
    expect(accounts.named('runlet-key-ci').subresource('token').toString()).toBe('/api/v1/namespaces/team-a/serviceaccounts/runlet-key-ci/token');
    expect(KubePath.of({ group: 'apps', version: 'v1', resource: 'deployments' }).toString()).toBe('/apis/apps/v1/deployments');
    expect(KubePath.of({ group: 'rbac.authorization.k8s.io', version: 'v1', namespace: 'ns', resource: 'rolebindings', name: 'b' }).toString()).toBe('/apis/rbac.authorization.k8s.io/v1/namespaces/ns/rolebindings/b');
    expect(KubePath.group('discovery.k8s.io').toString()).toBe('/apis/discovery.k8s.io');
    expect(KubePath.version.toString()).toBe('/version');
    expect(JSON.stringify({ path: accounts })).toBe('{"path":"/api/v1/namespaces/team-a/serviceaccounts"}');
  });

  it('keeps a traversal in a name as one encoded segment', () => {
    const path = accounts.named('runlet-key-x/../../../team-b/serviceaccounts/runlet-key-prod');
    expect(path.toString()).toBe('/api/v1/namespaces/team-a/serviceaccounts/runlet-key-x%2F..%2F..%2F..%2Fteam-b%2Fserviceaccounts%2Frunlet-key-prod');
    expect(new URL(path.toString(), 'https://api.invalid').pathname).toBe(path.toString());
  });

  it.each(['', '.', '..'])('refuses %j as any segment', (bad) => {
    expect(() => accounts.named(bad)).toThrow(`cannot have ${JSON.stringify(bad)} as its name`);
    expect(() => KubePath.of({ version: 'v1', namespace: bad, resource: 'pods' })).toThrow('as its namespace');
    expect(() => KubePath.of({ group: 'apps', version: bad, resource: 'deployments' })).toThrow('as its version');
    expect(() => KubePath.of({ version: 'v1', resource: bad })).toThrow('as its resource');
    expect(() => accounts.named('x').subresource(bad)).toThrow('as its subresource');
    expect(() => KubePath.group(bad)).toThrow('as its group');
  });

  it('refuses a subresource without a name, a second name or subresource, and names on other paths', () => {
    expect(() => KubePath.of({ version: 'v1', resource: 'pods', subresource: 'status' })).toThrow('needs a name');
    expect(() => accounts.named('a').named('b')).toThrow('names an object already');
    expect(() => accounts.named('a').subresource('token').subresource('x')).toThrow('a subresource already');
    expect(() => KubePath.version.named('x')).toThrow('is not a resource path');
  });

  it('for any name and namespace: one segment each, read back as given, and the URL parser resolves nothing', () => {
    const text = fc.string({ unit: 'binary', minLength: 1 }).filter((value) => value !== '.' && value !== '..' && !/[\uD800-\uDFFF]/.test(value));
    fc.assert(
      fc.property(text, text, (namespace, name) => {
        const path = KubePath.of({ version: 'v1', namespace, resource: 'serviceaccounts', name }).toString();
        const segments = path.split('/');
        expect(segments).toHaveLength(7);
        expect([decodeURIComponent(segments[4]!), decodeURIComponent(segments[6]!)]).toEqual([namespace, name]);
        expect(new URL(path, 'https://api.invalid').pathname).toBe(path);
      }),
      { numRuns: 2000 },
    );
  });
});
