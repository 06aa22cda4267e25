import { AuthenticationV1Api, AuthorizationV1Api } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { serverPerTest } from './test-helpers.ts';

const kube = serverPerTest((config) => ({ authn: config.makeApiClient(AuthenticationV1Api), authz: config.makeApiClient(AuthorizationV1Api) }));

describe('TokenReview', () => {
  it('authenticates tokens the test issued, and only those', async () => {
    kube.server.tokens.set('sa-token', {
      username: 'system:serviceaccount:team-a:caller',
      uid: 'uid-1',
      groups: ['system:serviceaccounts', 'system:serviceaccounts:team-a'],
      audiences: ['runlet'],
    });
    const known = await kube.authn.createTokenReview({ body: { spec: { token: 'sa-token', audiences: ['runlet'] } } });
    expect(known.status).toMatchObject({
      authenticated: true,
      user: { username: 'system:serviceaccount:team-a:caller', uid: 'uid-1', groups: ['system:serviceaccounts', 'system:serviceaccounts:team-a'] },
      audiences: ['runlet'],
    });

    const wrongAudience = await kube.authn.createTokenReview({ body: { spec: { token: 'sa-token', audiences: ['other'] } } });
    expect(wrongAudience.status?.authenticated).toBe(false);
    const unknown = await kube.authn.createTokenReview({ body: { spec: { token: 'forged' } } });
    expect(unknown.status?.authenticated).toBe(false);
    expect(unknown.status?.error).toBeTruthy();
  });
});

describe('SubjectAccessReview', () => {
  it('allows exactly what the test granted', async () => {
    kube.server.allow({ user: 'system:serviceaccount:team-a:caller', verb: 'list', group: 'runlet.dev', resource: 'runs', namespace: 'team-a' });
    kube.server.allow({ userGroup: 'admins', verb: '*' });
    const ask = (user: string, namespace: string, verb = 'list', groups: string[] = []) =>
      kube.authz.createSubjectAccessReview({
        body: { spec: { user, groups, resourceAttributes: { namespace, verb, group: 'runlet.dev', resource: 'runs' } } },
      });

    expect((await ask('system:serviceaccount:team-a:caller', 'team-a')).status?.allowed).toBe(true);
    expect((await ask('system:serviceaccount:team-a:caller', 'team-b')).status?.allowed).toBe(false);
    expect((await ask('system:serviceaccount:team-a:caller', 'team-a', 'delete')).status?.allowed).toBe(false);
    expect((await ask('someone', 'team-b', 'delete', ['admins'])).status?.allowed).toBe(true);
  });
});
