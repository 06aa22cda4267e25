// The runs API of `runlet dev` over real runs: newest first, pagination, filters, and survival of a restart.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ContractChecker } from '../support/contract.ts';
import { FIXTURE_APPS, postJson, startTestDevServer, type TestDevServer } from '../support/dev-server.ts';

const contract = new ContractChecker('management');
import type { RunRecord } from '../../crds/run-record-schema.ts';

let dev: TestDevServer;
const runIds: string[] = [];

beforeAll(async () => {
  dev = await startTestDevServer({ appDirs: [`${FIXTURE_APPS}/e2e`] });
  for (let i = 0; i < 7; i++) {
    const response = await postJson(`${dev.url}/v4/dev/e2e/${i % 3 === 0 ? 'boom' : 'echo'}`, i % 3 === 0 ? {} : { i });
    runIds.push(response.headers.get('x-request-id')!);
    await response.text();
  }
});
afterAll(async () => dev?.dispose());

async function page(query: string): Promise<{ items: RunRecord[]; nextToken: string | null }> {
  const response = await fetch(`${dev.url}/v2/projects/dev/apps/e2e/runs${query}`);
  expect(response.status).toBe(200);
  await contract.expectDescribed('GET', '/v2/projects/{project_id}/apps/{app_id}/runs', response);
  return (await response.json()) as { items: RunRecord[]; nextToken: string | null };
}

describe('runs API over real runs', () => {
  it('lists every run newest first with the recorded fields', async () => {
    const { items, nextToken } = await page('');
    expect(items.map((run) => run.id)).toEqual([...runIds].reverse());
    expect(nextToken).toBeNull();
    expect(items[1]).toMatchObject({ projectId: 'dev', appName: 'e2e', functionName: 'echo', method: 'POST', mode: 'sync', async: false, status: 'success', statusCode: 200 });
    expect(items[0]).toMatchObject({ functionName: 'boom', status: 'failure', statusCode: 500, error: { type: 'ValueError', message: 'boom' } });
  });

  it('pages with nextToken without gaps or duplicates, and filters by status', async () => {
    const seen: string[] = [];
    let query = '?pageSize=3';
    for (;;) {
      const { items, nextToken } = await page(query);
      seen.push(...items.map((run) => run.id));
      if (!nextToken) break;
      query = `?pageSize=3&nextToken=${encodeURIComponent(nextToken)}`;
    }
    expect(seen).toEqual([...runIds].reverse());
    const failures = await page('?status=failure');
    expect(failures.items.map((run) => run.id)).toEqual([runIds[6], runIds[3], runIds[0]]);
  });

  it('accepts the {project}-{app} form of app_id and answers one run by id', async () => {
    const { items } = await page('');
    const response = await fetch(`${dev.url}/v2/projects/dev/apps/dev-e2e/runs/${runIds[1]}`);
    expect(response.status).toBe(200);
    await contract.expectDescribed('GET', '/v2/projects/{project_id}/apps/{app_id}/runs/{run_id}', response);
    expect(await response.json()).toEqual({ item: items.find((run) => run.id === runIds[1]) });
  });

  it('counts the runs in the sidecar metrics', async () => {
    const metrics = await (await fetch(`${dev.url}/admin/metrics`)).text();
    expect(metrics).toMatch(/^runlet_runs_total\{mode="sync",status="success"\} 4$/m);
    expect(metrics).toMatch(/^runlet_runs_total\{mode="sync",status="failure"\} 3$/m);
    expect(metrics).toMatch(/^runlet_run_duration_seconds_count\{mode="sync"\} 7$/m);
    expect(metrics).toMatch(/^runlet_runs_in_flight 0$/m);
    expect(metrics).toMatch(/^runlet_queue_depth 0$/m);
  });

  it('keeps the runs across a restart of runlet dev', async () => {
    await dev.close();
    const again = await startTestDevServer({ appDirs: [`${FIXTURE_APPS}/e2e`], dataDir: dev.dataDir });
    try {
      const response = await fetch(`${again.url}/v2/projects/dev/apps/e2e/runs`);
      const { items } = (await response.json()) as { items: RunRecord[] };
      expect(items.map((run) => run.id)).toEqual([...runIds].reverse());
    } finally {
      await again.close();
    }
  });
});
