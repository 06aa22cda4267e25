// The operator's management API lists a project's Apps from its App cache: ready when their Ready condition is
// True, its message as the error when False, with its replicas and scaling; authorised like the runs list.
import { isDeepStrictEqual } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { startKubeApiServer, type KubeApiServer } from '../test/kube/index.ts';
import { waitFor } from '../test/support/wait.ts';
import { RUNS_ACCESS } from '../management/kube-auth.ts';
import type { App } from '../crds/app-schema.ts';
import type { AppSummary } from '../management/app-list.ts';
import type { Operator } from './main.ts';
import { pythonSpec } from '../test/support/operator-apps.ts';
import { STATE_TIMEOUT_MS, createApp, createCodeConfigMap, createNamespace, isAppliedAtGeneration, paths, prepareCluster, testOperator, waitForApp, type TestCluster } from '../test/support/fake-cluster.ts';
import { READY } from './app-status.ts';

let cluster: TestCluster<KubeApiServer>;
let operator: Operator | undefined;

afterEach(async () => {
  await operator?.stop();
  await cluster.close();
});

describe('GET /v2/projects/{project_id}/apps on the operator', () => {
  it("lists the project's Apps with their Ready condition, to a caller who may list runs there", async () => {
    cluster = await prepareCluster(await startKubeApiServer());
    for (const namespace of ['team', 'other']) await createNamespace(cluster.api, namespace);
    await createCodeConfigMap(cluster.api, 'team', 'hello-code', 'hello', { 'main.py': 'def run(): pass\n' });
    operator = testOperator(cluster, {});
    operator.start();
    await waitFor(() => operator!.ready, { timeoutMs: STATE_TIMEOUT_MS, what: 'the operator’s caches' });
    for (const name of ['two', 'one']) {
      await createApp(cluster.api, 'team', name, pythonSpec());
      await waitForApp(cluster.api, 'team', name, isAppliedAtGeneration, 'reconciled');
    }
    cluster.server.tokens.set('reader.x.y', { username: 'reader' });
    cluster.server.allow({ user: 'reader', namespace: 'team', ...RUNS_ACCESS });
    const url = await operator.listen();

    // What the API server says of each App, read again with each listing: the operator's status writes (its
    // desired replicas) may land between the two, so the listing is compared with a reading of the same moment.
    const summaries = () =>
      Promise.all(
        ['one', 'two'].map(async (name): Promise<AppSummary> => {
          const app = await cluster!.api.find<App>(paths.app('team', name));
          const ready = app?.status?.conditions?.find((condition) => condition.type === READY);
          const { minReplicas, maxReplicas, replicaConcurrency } = app!.spec.scaling;
          return {
            name,
            ready: ready?.status === 'True',
            error: ready?.status === 'False' ? ready.message : null,
            replicas: { ready: app?.status?.readyReplicas ?? 0, desired: app?.status?.desiredReplicas ?? app?.status?.replicas ?? minReplicas },
            scaling: { minReplicas, maxReplicas, replicaConcurrency },
          };
        }),
      );
    let expected: AppSummary[] = [];
    const listed = await waitFor(async () => {
      const response = await fetch(`${url}/v2/projects/team/apps`, { headers: { authorization: 'Bearer reader.x.y' } });
      const body = (await response.json()) as { items: AppSummary[] };
      expected = await summaries();
      return body.items?.length === 2 && isDeepStrictEqual(body.items, expected) && body;
    }, { timeoutMs: STATE_TIMEOUT_MS, what: 'both Apps listed as the API server has them' });
    expect(listed.items).toEqual(expected);

    expect((await fetch(`${url}/v2/projects/team/apps`)).status).toBe(401);
    expect((await fetch(`${url}/v2/projects/other/apps`, { headers: { authorization: 'Bearer reader.x.y' } })).status).toBe(403);
  });
});
