// The chart's embedded PostgreSQL (its StatefulSet, as the chart renders it by default) run on the image `make
// images` provides under that name (pulled, or the stand-in images/postgres-stand-in.sh builds from Debian's
// postgresql-15 with the official entrypoint), through testcontainers: as UID 999 on a read-only root with no
// capability, its claim a folder kept across restarts. Runlet's own image, in the same pod (network namespace),
// connects with `pg`, runs the results store's migrations and writes a run; PostgreSQL is restarted and the run
// is still there.
import { chown, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1StatefulSet } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_RUNLET_IMAGE } from '../../cli/images.ts';
import { readMigrations } from '../../results/migrate.ts';
import { objectOf, renderWith, VALUE_SETS } from '../chart/rendered.ts';
import { runRecord } from '../support/sqlite-run-records.ts';
import { waitFor } from '../support/wait.ts';
import { startContainerApi, type ContainerApi } from './container-api.ts';
import { BUILD_TIMEOUT_MS, buildImages, imageEngine, imageUser } from './images.ts';
import { podContainers, startPod, type RunningPod } from './pod-containers.ts';

/** initdb, then a server start: seconds, more on a loaded 2-core machine. */
const START_TIMEOUT_MS = 120_000;
const PASSWORD = 'a-password-the-operator-would-make';
/** The StatefulSet's UID and GID, which own the claim's folder as fsGroup would make it. */
const POSTGRES_UID = 999;

const found = imageEngine();
const skipReason = 'skipReason' in found ? found.skipReason : undefined;
if (skipReason !== undefined) console.log(`the embedded PostgreSQL image: skipped, ${skipReason}`);

/**
 * Run in the Runlet image, next to PostgreSQL: the results store's migrations and store, as the operator runs
 * them, over `pg` to 127.0.0.1:5432. Prints the schema version, then the run as read back (or `null`).
 */
const CLIENT = `
import pg from 'pg';
import { migrate } from '/opt/runlet/dist/results/migrate.js';
import { PgResults } from '/opt/runlet/dist/results/pg-results.js';
const pool = new pg.Pool({ connectionString: process.env.DSN });
const store = new PgResults(pool);
const version = await migrate(pool);
const record = JSON.parse(process.env.RECORD);
if (process.env.WRITE === 'yes') await store.writeBatch([record]);
const read = await store.getRun(record.projectId, record.appName, record.id);
console.log(JSON.stringify({ version, read: read ?? null }));
await pool.end();
`;

describe.skipIf(skipReason !== undefined)('the embedded PostgreSQL’s image', { timeout: START_TIMEOUT_MS * 3 }, () => {
  const engine = 'engine' in found ? found.engine : 'podman';
  const statefulSet = objectOf<V1StatefulSet>(renderWith(VALUE_SETS.default), 'StatefulSet', 'runlet-postgres');
  const image = statefulSet.spec!.template.spec!.containers[0]!.image!;
  let api: ContainerApi;
  let dataDir: string;
  let pod: RunningPod | undefined;

  beforeAll(async () => {
    const { seconds } = await buildImages();
    console.log(`images built (or found current) in ${seconds.toFixed(1)} s`);
    api = await startContainerApi(engine);
    dataDir = await mkdtemp(join(tmpdir(), 'runlet-postgres-claim-'));
    // What the kubelet's fsGroup does to a claim's volume; the test runs as root, or leaves it to a writable mode.
    await chown(dataDir, POSTGRES_UID, POSTGRES_UID).catch(() => undefined);
  }, BUILD_TIMEOUT_MS);

  afterAll(async () => {
    await pod?.stop();
    await api?.stop();
    if (dataDir !== undefined) await rm(dataDir, { recursive: true, force: true });
  }, START_TIMEOUT_MS);

  /** PostgreSQL as the chart renders it, and a Runlet container (kept up by `sleep`) in its network namespace. */
  async function startPostgresPod(): Promise<RunningPod> {
    const containers = podContainers(statefulSet, {
      configMapDirs: {},
      claimDirs: { data: dataDir },
      secrets: { 'runlet-postgres': { password: PASSWORD } },
      podName: 'runlet-postgres-0',
      namespace: 'runlet-system',
    });
    const client = podContainers(
      { spec: { template: { spec: { securityContext: { runAsNonRoot: true }, containers: [{ name: 'client', image: DEFAULT_RUNLET_IMAGE, command: ['sleep'], args: ['infinity'], securityContext: { runAsUser: 1000, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } } }] } } } },
      { configMapDirs: {}, podName: 'runlet-postgres-0', namespace: 'runlet-system' },
    );
    pod = await startPod([...containers, ...client]);
    return pod;
  }

  /** The chart's own readiness probe command, run as the kubelet would, until it succeeds. */
  async function ready(running: RunningPod): Promise<void> {
    const probe = statefulSet.spec!.template.spec!.containers[0]!.readinessProbe!.exec!.command!;
    await waitFor(async () => (await running.container('postgres').exec(probe)).exitCode === 0, {
      what: `${probe.join(' ')} to succeed`,
      timeoutMs: START_TIMEOUT_MS,
      intervalMs: 250,
    });
  }

  async function client(running: RunningPod, record: object, write: boolean): Promise<{ version: number; read: unknown }> {
    const dsn = `postgres://runlet:${PASSWORD}@127.0.0.1:5432/runlet`;
    const output = await running.exec('client', [
      'env', `DSN=${dsn}`, `RECORD=${JSON.stringify(record)}`, `WRITE=${write ? 'yes' : 'no'}`,
      'sh', '-c', 'cd /opt/runlet && exec node --input-type=module -e "$0"', CLIENT,
    ]);
    return JSON.parse(output.trim().split('\n').at(-1)!) as { version: number; read: unknown };
  }

  it('is the name the chart runs, with the official image’s user as its postgres user', async () => {
    expect(image).toBe('postgres:15-bookworm');
    // The official image runs its entrypoint as root and steps down; the chart runs it as 999 from the start.
    expect(await imageUser(engine, image)).toBe('');
  });

  it('initialises from POSTGRES_* as the chart sets them, takes the results migrations and a run over pg, and keeps them across a restart', async () => {
    const record = runRecord({ projectId: 'team-a', appName: 'hello' });
    let running = await startPostgresPod();
    await ready(running);
    expect((await running.exec('postgres', ['id'])).trim()).toBe('uid=999(postgres) gid=999(postgres) groups=999(postgres)');
    const first = await client(running, record, true);
    expect(first.version).toBe(readMigrations().length);
    expect(first.read).toMatchObject({ id: record.id, status: 'success' });
    // PostgreSQL's data is in the claim's folder, below it (PGDATA): not in the container.
    expect(await running.exec('postgres', ['sh', '-c', 'ls "$PGDATA"'])).toContain('PG_VERSION');

    await running.stop();
    pod = undefined;
    running = await startPostgresPod();
    await ready(running);
    const after = await client(running, record, false);
    expect(after.version).toBe(readMigrations().length);
    expect(after.read).toMatchObject({ id: record.id, status: 'success', projectId: 'team-a', appName: 'hello' });
  });
});
