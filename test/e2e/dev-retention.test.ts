// runlet dev deletes the runs past their app's retention (`[runs] retention_days`, 30 days by default) from its
// SQLite store as it starts and then hourly, as the cluster's results store does.
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunRecord } from '../../crds/run-record-schema.ts';
import { SqliteRunStore } from '../../sidecar/runs/sqlite-run-store.ts';
import { FIXTURE_APPS, startTestDevServer, type TestDevServer } from '../support/dev-server.ts';
import { testLogger } from '../support/logger.ts';
import { runRecord } from '../support/sqlite-run-records.ts';

const DAY_MS = 24 * 60 * 60 * 1000;
const daysAgo = (days: number): string => new Date(Date.now() - days * DAY_MS).toISOString();

let root: string;
let dev: TestDevServer;
const runs: Record<string, RunRecord> = {};

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'runlet-dev-retention-'));
  // Two apps: `e2e` keeps the default 30 days, `keeper` sets 60.
  const keeper = join(root, 'keeper');
  await cp(join(FIXTURE_APPS, 'e2e'), keeper, { recursive: true });
  const toml = (await readFile(join(keeper, 'service.toml'), 'utf8')).replace('name = "e2e"', 'name = "keeper"');
  await writeFile(join(keeper, 'service.toml'), `${toml}\n[runs]\nretention_days = 60\n`);

  // A data dir a long-running runlet dev left: runs of 40 days ago and of today.
  const dataDir = join(root, 'data');
  const seeded = new SqliteRunStore({ dataDir, logger: testLogger() });
  runs.oldDefault = runRecord({ projectId: 'dev', appName: 'e2e', createdAt: daysAgo(40) });
  runs.newDefault = runRecord({ projectId: 'dev', appName: 'e2e', createdAt: daysAgo(1) });
  runs.oldKeeper = runRecord({ projectId: 'dev', appName: 'keeper', createdAt: daysAgo(40) });
  runs.olderKeeper = runRecord({ projectId: 'dev', appName: 'keeper', createdAt: daysAgo(61) });
  runs.goneApp = runRecord({ projectId: 'dev', appName: 'removed', createdAt: daysAgo(31) });
  for (const run of Object.values(runs)) seeded.save(run);
  await seeded.close();

  dev = await startTestDevServer({ appDirs: [join(FIXTURE_APPS, 'e2e'), keeper], dataDir });
});

afterAll(async () => {
  await dev?.dispose();
  await rm(root, { recursive: true, force: true });
});

describe('runlet dev retention', () => {
  it("deletes at start the runs older than their app's retention_days, 30 days where an app sets none", async () => {
    expect(await dev.retention.settled).toBe(3);
    const kept = async (run: RunRecord): Promise<boolean> => (await dev.store.getRun(run.projectId, run.appName, run.id)) !== undefined;
    expect(await kept(runs.oldDefault)).toBe(false);
    expect(await kept(runs.newDefault)).toBe(true);
    expect(await kept(runs.oldKeeper)).toBe(true);
    expect(await kept(runs.olderKeeper)).toBe(false);
    // An app no longer served keeps the default.
    expect(await kept(runs.goneApp)).toBe(false);
  });
});
