import { AuthenticationV1Api, AuthorizationV1Api } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startKubeApiServer, type KubeApiServer } from './index.ts';

let server: KubeApiServer;
let authn: AuthenticationV1Api;
let authz: AuthorizationV1Api;

beforeEach(async () => {
  server = await startKubeApiServer();
  authn = server.kubeConfig().makeApiClient(AuthenticationV1Api);
  authz = server.kubeConfig().makeApiClient(AuthorizationV1Api);
});

afterEach(async () => {
  await server.close();
});

describe('TokenReview', () => {
  it('authenticates tokens the test issued, and only those', async () => {
    server.tokens.set('sa-token', {
      username: 'system:serviceaccount:team-a:caller',
      uid: 'uid-1',
      groups: ['system:serviceaccounts', 'system:serviceaccounts:team-a'],
      audiences: ['runlet'],
    });
    const known = await authn.createTokenReview({ body: { spec: { token: 'sa-token', audiences: ['runlet'] } } });
    expect(known.status).toMatchObject({
      authenticated: true,
      user: { username: 'system:serviceaccount:team-a:caller', uid: 'uid-1', groups: ['system:serviceaccounts', 'system:serviceaccounts:team-a'] },
      audiences: ['runlet'],
    });

    const wrongAudience = await authn.createTokenReview({ body: { spec: { token: 'sa-token', audiences: ['other'] } } });
    expect(wrongAudience.status?.authenticated).toBe(false);
    const unknown = await authn.createTokenReview({ body: { spec: { token: 'forged' } } });
    expect(unknown.status?.authenticated).toBe(false);
    expect(unknown.status?.error).toBeTruthy();
  });
});

describe('SubjectAccessReview', () => {
  it('allows exactly what the test granted', async () => {
    server.allow({ user: 'system:serviceaccount:team-a:caller', verb: 'list', group: 'runlet.dev', resource: 'runs', namespace: 'team-a' });
    server.allow({ userGroup: 'admins', verb: '*' });
    const ask = (user: string, namespace: string, verb = 'list', groups: string[] = []) =>
      authz.createSubjectAccessReview({
        body: { spec: { user, groups, resourceAttributes: { namespace, verb, group: 'runlet.dev', resource: 'runs' } } },
      });

    expect((await ask('system:serviceaccount:team-a:caller', 'team-a')).status?.allowed).toBe(true);
    expect((await ask('system:serviceaccount:team-a:caller', 'team-b')).status?.allowed).toBe(false);
    expect((await ask('system:serviceaccount:team-a:caller', 'team-a', 'delete')).status?.allowed).toBe(false);
    expect((await ask('someone', 'team-b', 'delete', ['admins'])).status?.allowed).toBe(true);
  });
});
