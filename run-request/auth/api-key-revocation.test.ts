// A revoked API key (its ServiceAccount deleted) stops working on the run interface within a minute, although
// the sidecar verifies service-account tokens offline: a key's token is admitted only while its ServiceAccount
// exists with the token's uid, asked of the API server (here the in-memory one) at least every minute.
import { afterEach, describe, expect, it } from 'vitest';
import { KubeApi } from '../../kube/client.ts';
import type { KubeObject } from '../../kube/objects.ts';
import { ProblemError } from '../../crds/problem.ts';
import { startKubeApiServer, type KubeApiServer } from '../../test/kube/index.ts';
import { startServiceAccountIssuer, type ServiceAccountIssuer } from '../../test/operator/service-account-issuer.ts';
import { RunAuthenticator } from './authenticator.ts';
import { API_KEY_RECHECK_MS, kubeServiceAccountCheck } from './service-account-check.ts';
import { kubePathOf } from '../../test/support/kube-path.ts';

const PROJECT = 'team';
const ACCOUNTS = `/api/v1/namespaces/${PROJECT}/serviceaccounts`;

let server: KubeApiServer | undefined;
let issuer: ServiceAccountIssuer | undefined;
let api: KubeApi | undefined;

afterEach(async () => {
  await api?.close();
  await issuer?.close();
  await server?.close();
  api = issuer = server = undefined;
});

async function createAccount(name: string): Promise<string> {
  const account = await api!.create<KubeObject & { metadata: { uid?: string } }>(kubePathOf(ACCOUNTS), { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name, namespace: PROJECT } });
  return account.metadata.uid!;
}

async function setUp(): Promise<{ auth: RunAuthenticator; advance: (ms: number) => void; gets: () => number }> {
  server = await startKubeApiServer({ namespaces: [PROJECT] });
  api = new KubeApi(await server.credentials());
  issuer = await startServiceAccountIssuer();
  let nowMs = Date.now();
  const auth = new RunAuthenticator({ audience: 'runlet', jwksUrl: issuer.jwksUrl }, { now: () => nowMs });
  auth.checkApiKeysWith(kubeServiceAccountCheck(api));
  const gets = () => server!.requests.filter((request) => request.method === 'GET' && request.path.startsWith(`${ACCOUNTS}/`)).length;
  return { auth, advance: (ms) => (nowMs += ms), gets };
}

async function refusal(pending: Promise<void> | void): Promise<string> {
  try {
    await pending;
  } catch (err) {
    if (err instanceof ProblemError) return `${err.status} ${err.detail}`;
    throw err;
  }
  return 'admitted';
}

describe('an API key revoked in a cluster', () => {
  it('is refused on the run interface within a minute of its ServiceAccount being deleted, and not revived by a namesake', async () => {
    const { auth, advance } = await setUp();
    const uid = await createAccount('runlet-key-ci');
    const header = `Bearer ${await issuer!.token(PROJECT, { name: 'runlet-key-ci', uid })}`;
    expect(await refusal(auth.authenticate(header, PROJECT))).toBe('admitted');

    await api!.delete(kubePathOf(`${ACCOUNTS}/runlet-key-ci`));
    // Verified a moment ago: admitted from the cache for the rest of the minute, then asked about again.
    advance(API_KEY_RECHECK_MS - 1);
    expect(auth.authenticate(header, PROJECT)).toBeUndefined();
    advance(1);
    expect(await refusal(auth.authenticate(header, PROJECT))).toBe('401 The token\'s API key was revoked: its ServiceAccount team/runlet-key-ci no longer exists');

    // A new key of the same name is another ServiceAccount (another uid): the old token stays refused.
    await createAccount('runlet-key-ci');
    expect(await refusal(auth.authenticate(header, PROJECT))).toMatch(/^401 .*revoked/);
  });

  it("is refused on another namespace's apps (403), from the cache too", async () => {
    const { auth } = await setUp();
    const uid = await createAccount('runlet-key-ci');
    const header = `Bearer ${await issuer!.token(PROJECT, { name: 'runlet-key-ci', uid })}`;
    expect(await refusal(auth.authenticate(header, 'team-b'))).toMatch(/^403 /);
    expect(await refusal(auth.authenticate(header, PROJECT))).toBe('admitted');
    expect(await refusal(auth.authenticate(header, 'team-b'))).toMatch(/^403 /);
  });

  it("refuses another namespace's key (403) before asking the API server about it", async () => {
    // The sidecar may not read another namespace's ServiceAccounts: asked, it would answer 503 where the answer
    // is 403, and make one API server call per call of a hostile tenant.
    const { auth, gets } = await setUp();
    const uid = await createAccount('runlet-key-ci');
    await api!.delete(kubePathOf(`${ACCOUNTS}/runlet-key-ci`));
    const header = `Bearer ${await issuer!.token(PROJECT, { name: 'runlet-key-ci', uid })}`;
    for (let call = 0; call < 3; call++) expect(await refusal(auth.authenticate(header, 'team-b'))).toMatch(/^403 /);
    expect(gets()).toBe(0);
    // The refusal remembered there admits nothing in the key's own namespace: the key is looked up, and revoked.
    expect(await refusal(auth.authenticate(header, PROJECT))).toMatch(/^401 .*revoked/);
  });

  it('leaves other service-account tokens unchecked, cached as before', async () => {
    const { auth, advance, gets } = await setUp();
    const uid = await createAccount('ci');
    const header = `Bearer ${await issuer!.token(PROJECT, { name: 'ci', uid })}`;
    await auth.authenticate(header, PROJECT);
    advance(API_KEY_RECHECK_MS * 2);
    expect(auth.authenticate(header, PROJECT)).toBeUndefined();
    expect(gets()).toBe(0);
  });
});
