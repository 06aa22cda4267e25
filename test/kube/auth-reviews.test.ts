import { AuthenticationV1Api, AuthorizationV1Api, CoreV1Api } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { serverPerTest } from './test-helpers.ts';

const kube = serverPerTest((config) => ({ authn: config.makeApiClient(AuthenticationV1Api), authz: config.makeApiClient(AuthorizationV1Api), core: config.makeApiClient(CoreV1Api) }));

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

describe('TokenRequest bound to a pod (a projected token, as the kubelet asks for one)', () => {
  async function podOf(serviceAccountName: string) {
    await kube.core.createNamespacedServiceAccount({ namespace: 'default', body: { metadata: { name: 'worker' } } });
    return kube.core.createNamespacedPod({ namespace: 'default', body: { metadata: { name: 'p' }, spec: { serviceAccountName, containers: [{ name: 'c', image: 'i' }] } } });
  }
  const request = (pod: { metadata?: { name?: string; uid?: string } }, audiences = ['runlet-results']) =>
    kube.core.createNamespacedServiceAccountToken({
      namespace: 'default',
      name: 'worker',
      body: { spec: { audiences, expirationSeconds: 600, boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: pod.metadata!.name!, uid: pod.metadata!.uid! } } },
    });

  it('names the pod in the user\'s extra, for its audience only, until the pod is gone', async () => {
    const pod = await podOf('worker');
    const token = (await request(pod)).status!.token!;
    const review = await kube.authn.createTokenReview({ body: { spec: { token, audiences: ['runlet-results'] } } });
    expect(review.status).toMatchObject({
      authenticated: true,
      audiences: ['runlet-results'],
      user: { username: 'system:serviceaccount:default:worker', extra: { 'authentication.kubernetes.io/pod-name': ['p'], 'authentication.kubernetes.io/pod-uid': [pod.metadata!.uid] } },
    });
    expect((await kube.authn.createTokenReview({ body: { spec: { token, audiences: ['https://kubernetes.default.svc.cluster.local'] } } })).status?.authenticated).toBe(false);
    await kube.core.deleteNamespacedPod({ namespace: 'default', name: 'p' });
    const gone = await kube.authn.createTokenReview({ body: { spec: { token, audiences: ['runlet-results'] } } });
    expect(gone.status).toMatchObject({ authenticated: false, error: 'pod default/p has been deleted' });
  });

  it('is refused for a pod of another uid or another ServiceAccount', async () => {
    const pod = await podOf('default');
    await expect(request(pod)).rejects.toMatchObject({ code: 400 });
    await expect(request({ metadata: { name: 'p', uid: 'not-its-uid' } })).rejects.toMatchObject({ code: 409 });
    await expect(request({ metadata: { name: 'nobody', uid: 'x' } })).rejects.toMatchObject({ code: 404 });
  });
});
