// The embedded PostgreSQL's Secret, against the in-memory API server: made once with a random password and its
// `dsn`, read back afterwards; one Secret for replicas that start together; a Secret without `dsn` is an error
// that names it.
import { afterEach, describe, expect, it } from 'vitest';
import { KubeApi } from '../kube/client.ts';
import type { KubeObject } from '../kube/objects.ts';
import { startKubeApiServer, type KubeApiServer } from '../test/kube/index.ts';
import { ensureResultsSecret } from './results-secret.ts';
import { kubePathOf } from '../test/support/kube-path.ts';

const PLACE = { namespace: 'runlet-system', name: 'runlet-postgres', host: 'runlet-postgres.runlet-system.svc' };
const SECRETS = '/api/v1/namespaces/runlet-system/secrets';

describe('the results Secret', () => {
  let server: KubeApiServer | undefined;
  let api: KubeApi | undefined;
  afterEach(async () => {
    await api?.close();
    await server?.close();
  });

  async function start(): Promise<KubeApi> {
    server = await startKubeApiServer({ namespaces: ['runlet-system'] });
    api = new KubeApi(await server.credentials());
    return api;
  }

  it('is made with a random password and the dsn of the embedded PostgreSQL when missing, then read as it is', async () => {
    const kube = await start();
    const made = await ensureResultsSecret(kube, PLACE);
    expect(made.created).toBe(true);
    expect(made.dsn).toMatch(/^postgres:\/\/runlet:[0-9a-f]{64}@runlet-postgres\.runlet-system\.svc:5432\/runlet$/);
    const secret = await kube.get<KubeObject & { data?: Record<string, string> }>(kubePathOf(`${SECRETS}/runlet-postgres`));
    const password = Buffer.from(secret.data!.password!, 'base64').toString('utf8');
    expect(made.dsn).toContain(`:${password}@`);
    expect(await ensureResultsSecret(kube, PLACE)).toEqual({ dsn: made.dsn, created: false });
    expect(server!.countRequests({ method: 'POST' })).toBe(1);
    // Two installs never share a password.
    const other = await ensureResultsSecret(kube, { ...PLACE, name: 'other-postgres' });
    expect(other.dsn).not.toBe(made.dsn);
  });

  it('is one Secret for replicas that start together: the one whose create lost (409) reads the winner’s', async () => {
    const kube = await start();
    const all = await Promise.all([ensureResultsSecret(kube, PLACE), ensureResultsSecret(kube, PLACE), ensureResultsSecret(kube, PLACE)]);
    expect(new Set(all.map((credentials) => credentials.dsn)).size).toBe(1);
    expect(all.filter((credentials) => credentials.created)).toHaveLength(1);
  });

  it('names a Secret that has no dsn (one written by hand)', async () => {
    const kube = await start();
    await kube.create(kubePathOf(SECRETS), { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'runlet-postgres', namespace: 'runlet-system' }, data: { password: 'eA==' } } as KubeObject);
    await expect(ensureResultsSecret(kube, PLACE)).rejects.toThrow('the results Secret runlet-system/runlet-postgres has no "dsn" entry');
  });
});
