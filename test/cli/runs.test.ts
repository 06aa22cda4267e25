// `runlet runs` against `runlet dev`, and its errors against a management API that wants a token.
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { managementApi } from '../../management/routes.ts';
import { Problems } from '../../crds/problems.ts';
import { ProblemError } from '../../crds/problem.ts';
import type { RunRecord } from '../../crds/run-record-schema.ts';
import { runCli } from '../support/cli.ts';
import { waitFor } from '../support/wait.ts';
import { FIXTURE_APPS, postJson, startTestDevServer, type TestDevServer } from '../support/dev-server.ts';

let dev: TestDevServer;
const runIds: string[] = [];

beforeAll(async () => {
  dev = await startTestDevServer({ appDirs: [`${FIXTURE_APPS}/e2e`] });
  for (const [fn, body] of [['echo', { a: 1 }], ['boom', {}], ['echo', { a: 2 }]] as const) {
    const response = await postJson(`${dev.url}/v4/dev/e2e/${fn}`, body);
    runIds.push(response.headers.get('x-request-id')!);
    await response.text();
  }
  const accepted = await postJson(`${dev.url}/v4/dev/e2e/echo?async=true`, {});
  runIds.push(((await accepted.json()) as { run_id: string }).run_id);
});
afterAll(async () => dev?.dispose());

describe('runlet runs against runlet dev', () => {
  it('prints a table of runs, newest first', async () => {
    const result = await runCli(['runs', 'e2e', '--api-url', dev.url]);
    expect(result.code).toBe(0);
    const lines = result.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^RUN ID\s+FUNCTION\s+MODE\s+STATUS\s+CODE\s+CREATED\s+RUN TIME\s+WEBHOOK\s+ERROR$/);
    expect(lines.slice(1).map((line) => line.split(/\s+/)[0])).toEqual([...runIds].reverse());
    expect(lines.find((line) => line.startsWith(runIds[1]!))).toMatch(/boom\s+sync\s+failure\s+500\s.*\s-\s+ValueError: boom$/);
    expect(lines.find((line) => line.startsWith(runIds[0]!))).toMatch(/\s-$/);
  });

  it('prints JSON for scripts, with filters and a limit', async () => {
    const failures = await runCli(['runs', 'e2e', '--api-url', dev.url, '--status', 'failure', '--output', 'json']);
    expect((JSON.parse(failures.stdout) as Array<{ id: string }>).map((run) => run.id)).toEqual([runIds[1]]);
    const asyncOnly = await runCli(['runs', 'e2e', '--api-url', dev.url, '--async-only', '--output', 'json']);
    expect((JSON.parse(asyncOnly.stdout) as Array<{ id: string }>).map((run) => run.id)).toEqual([runIds[3]]);
    const limited = await runCli(['runs', 'e2e', '--api-url', dev.url, '--limit', '2', '--output', 'json']);
    expect((JSON.parse(limited.stdout) as unknown[]).length).toBe(2);
  });

  it('names the fix for an unknown app, an unreachable API and a bad option', async () => {
    const unknown = await runCli(['runs', 'nope', '--api-url', dev.url]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/no app nope in project dev.*check the app name and --project/);
    const unreachable = await runCli(['runs', 'e2e', '--api-url', 'http://127.0.0.1:1']);
    expect(unreachable.stderr).toMatch(/cannot reach the management API at http:\/\/127\.0\.0\.1:1.*--api-url/);
    const badStatus = await runCli(['runs', 'e2e', '--status', 'done']);
    expect(badStatus.code).toBe(2);
    expect(badStatus.stderr).toMatch(/--status must be one of/);
  });
});

describe('runlet runs cancel against runlet dev', () => {
  async function status(runId: string): Promise<RunRecord['status'] | null> {
    const response = await fetch(`${dev.url}/v2/projects/dev/apps/e2e/runs/${runId}`);
    return response.ok ? ((await response.json()) as { item: RunRecord }).item.status : null;
  }

  it('cancels a running run, says so again when repeated, and refuses a finished one', async () => {
    const gate = join(await mkdtemp(join(tmpdir(), 'runlet-cli-cancel-')), 'never');
    const accepted = await postJson(`${dev.url}/v4/dev/e2e/gated?async=true`, { gate });
    const runId = ((await accepted.json()) as { run_id: string }).run_id;
    await waitFor(async () => (await status(runId)) === 'running', { what: 'the run to start' });

    const cancelled = await runCli(['runs', 'cancel', runId, '--app', 'e2e', '--api-url', dev.url]);
    expect(cancelled.code).toBe(0);
    expect(cancelled.stdout).toMatch(new RegExp(`^run ${runId} is (being cancelled|cancelled)`));
    await waitFor(async () => (await status(runId)) === 'cancelled', { what: 'the run to be cancelled' });
    const repeated = await runCli(['runs', 'cancel', runId, '--app', 'e2e', '--api-url', dev.url, '--output', 'json']);
    expect(repeated.code).toBe(0);
    expect(JSON.parse(repeated.stdout)).toMatchObject({ id: runId, status: 'cancelled', reason: 'cancel_requested' });

    const finished = await runCli(['runs', 'cancel', runIds[0]!, '--app', 'e2e', '--api-url', dev.url]);
    expect(finished.code).toBe(1);
    expect(finished.stderr).toMatch(/has already finished \(success\)/);
  });

  it('needs --app, and keeps listing the runs of an app named cancel', async () => {
    const noApp = await runCli(['runs', 'cancel', 'some-id', '--api-url', dev.url]);
    expect(noApp.code).toBe(2);
    expect(noApp.stderr).toMatch(/runlet runs cancel needs --app/);
    const listed = await runCli(['runs', 'cancel', '--api-url', dev.url]);
    expect(listed.stderr).toMatch(/no app cancel in project dev/);
  });
});

describe('runlet runs against a management API that requires a token', () => {
  const server = Fastify();
  let url: string;
  beforeAll(async () => {
    await server.register(managementApi, {
      runs: { listRuns: async () => ({ items: [], hasMore: false }), getRun: async () => undefined },
      apps: { hasApp: () => true },
      appList: () => [],
      authenticate: async (request) => {
        const header = request.headers.authorization;
        if (!header) throw new ProblemError(Problems.unauthorized, 'no bearer token');
        if (header !== 'Bearer good') throw new ProblemError(Problems.forbidden, 'not allowed to list runs');
      },
    });
    url = await server.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(() => server.close());

  it('explains 401 (make a token) and 403 (bind the viewer role)', async () => {
    const missing = await runCli(['runs', 'shop', '--api-url', url, '--project', 'team-a']);
    expect(missing.stderr).toMatch(/needs a valid token.*RUNLET_TOKEN.*kubectl create token/);
    const denied = await runCli(['runs', 'shop', '--api-url', url, '--project', 'team-a'], { env: { RUNLET_TOKEN: 'other' } });
    expect(denied.stderr).toMatch(/may not list runs in project team-a.*runlet-runs-viewer/);
    const allowed = await runCli(['runs', 'shop', '--api-url', url, '--project', 'team-a', '--token', 'good']);
    expect(allowed.code).toBe(0);
    expect(allowed.stdout).toBe('No runs.\n');
  });

  it('says when the management API serves no cancel operation', async () => {
    const result = await runCli(['runs', 'cancel', 'some-id', '--app', 'shop', '--api-url', url, '--token', 'good']);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/does not serve this operation/);
  });
});
