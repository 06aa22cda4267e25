// What one busy replica costs the cluster's API server and etcd, before and after the results store: on the real
// control plane (test/control-plane: kube-apiserver 1.20 and etcd 3.4, pods run by the test kubelet as local
// processes), examples/hello at one replica takes RATE sync calls a second. Once per run store: `--run-store
// runlog` (the operator without a results store: the sidecar rewrites its RunLog's status about once a second)
// and `--run-store results` (the operator with a PostgreSQL of its own: records go to its collector). Each mode
// gets a fresh control plane, with the API server's audit log on (every write by a service account, with its
// request and response objects). After WARM_UP_S of load (the RunLog's window of 200 finished runs is full by
// then), WINDOW_S of load are measured:
//   writes     the audit log's writes (create, update, patch, delete) by Runlet's identities — the App
//              namespace's runlet-sidecar (the busy replica's own) and install.yaml's runlet-operator (for the
//              App: its status; its leader Lease is logged apart, a cost per operator) — received in the window
//   stored     the size of each written object as the API server answered it (what etcd stores per revision)
//   requests   the size of the request bodies (a status patch's payload)
//   etcd in    etcd's own count of bytes received from its clients (the API server), for the whole cluster: the
//              kubelet's node status and leases and the controllers count too, the same in both modes
// and the sidecar's RSS after the load. The operator runs in the bench's own process here (as in the tier), so
// its memory is not told apart. Measured once per run, after the rounds.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { RbacAuthorizationV1Api } from '@kubernetes/client-node';
import pino from 'pino';
import { openResults, type OpenResults } from '../../results/open.ts';
import { SIDECAR_CONTAINER, SIDECAR_SERVICE_ACCOUNT } from '../../operator/render/names.ts';
import { controlPlaneSkipReason } from '../../test/control-plane/control-plane.ts';
import { OPERATOR, startControlPlaneCluster, type ControlPlaneCluster } from '../../test/operator/control-plane-cluster.ts';
import { HelloApp } from '../../test/operator/hello-app.ts';
import { isReady } from '../../test/operator/operator-suite.ts';
import { startPostgres, type PostgresServer } from '../../test/support/postgres.ts';
import { waitFor } from '../../test/support/wait.ts';
import { runAutocannon } from '../load/autocannon.ts';
import type { FigureSpec, RoundFigures } from '../report.ts';
import { readRssSplit } from '../smaps.ts';

const SCENARIO = 'etcd writes per busy replica';
/** Sync calls a second, the same in both modes (the issue measured 200 and 1,000: the RunLog cost is the same). */
const RATE = 200;
const CONNECTIONS = 8;
const WARM_UP_S = 15;
const WINDOW_S = 30;
const WAIT = { timeoutMs: 180_000, intervalMs: 200 };
const MODES = ['runlog', 'results'] as const;
type Mode = (typeof MODES)[number];

const figure = (mode: Mode, key: string, label: string, unit: string, decimals: number, target?: FigureSpec['target']): FigureSpec => ({
  key: `etcd.${mode}.${key}`,
  scenario: SCENARIO,
  label: `\`--run-store ${mode}\`: ${label}`,
  unit,
  decimals,
  ...(target === undefined ? {} : { target }),
});

export const ETCD_WRITES_FIGURES: FigureSpec[] = MODES.flatMap((mode) => [
  // The bound for what a sidecar may still write to the API server: one write per 10 s per replica.
  figure(mode, 'sidecarWritesPerSecond', `the sidecar's writes to the API server a second, one replica at ${RATE} sync calls/s`, '/s', 2, mode === 'results' ? { op: '<=', value: 0.1 } : undefined),
  figure(mode, 'sidecarStoredKBPerSecond', 'kB a second of the objects those writes stored (into etcd, one revision each)', 'kB/s', 1),
  figure(mode, 'sidecarRequestKBPerSecond', 'kB a second of their request bodies', 'kB/s', 1),
  figure(mode, 'operatorWritesPerSecond', "the operator's writes a second for that App (its leader Lease apart)", '/s', 2),
  figure(mode, 'operatorStoredKBPerSecond', 'kB a second of the objects those writes stored', 'kB/s', 1),
  figure(mode, 'etcdReceivedKBPerSecond', 'kB a second etcd received from the API server, whole cluster (kubelet, controllers and leases included)', 'kB/s', 1),
  figure(mode, 'callsPerSecond', 'sync calls answered a second during the window', '/s', 0),
  figure(mode, 'sidecarRssMiB', 'sidecar RSS after the load', 'MiB', 1),
]);

/** One line of the audit log, the fields read here. */
interface AuditEvent {
  stage: string;
  verb: string;
  user: { username: string };
  objectRef?: { resource?: string; subresource?: string };
  requestReceivedTimestamp: string;
  requestObject?: unknown;
  responseObject?: unknown;
}

const WRITE_VERBS = new Set(['create', 'update', 'patch', 'delete', 'deletecollection']);

export async function measureEtcdWrites(): Promise<RoundFigures> {
  const skipReason = controlPlaneSkipReason();
  if (skipReason !== undefined) {
    process.stdout.write(`bench: etcd-writes skipped (its figures stay empty): ${skipReason}\n`);
    return {};
  }
  const figures: RoundFigures = {};
  for (const mode of MODES) Object.assign(figures, await measureMode(mode));
  return figures;
}

async function measureMode(mode: Mode): Promise<RoundFigures> {
  const postgres: PostgresServer | undefined = mode === 'results' ? await startPostgres({ durable: true }) : undefined;
  let cluster: ControlPlaneCluster | undefined;
  let results: OpenResults | undefined;
  try {
    results = postgres === undefined ? undefined : await openResults({ dsn: postgres.dsn(await postgres.createDatabase('runlet')), logger: pino({ level: 'warn' }) });
    cluster = await startControlPlaneCluster({ audit: true, results: results === undefined ? null : { store: results.store } });
    return await loadAndCount(cluster, mode);
  } catch (error) {
    if (cluster !== undefined) process.stdout.write(`${cluster.diagnostics()}\n`);
    throw error;
  } finally {
    await cluster?.close();
    await results?.close();
    await postgres?.stop();
  }
}

async function loadAndCount(cluster: ControlPlaneCluster, mode: Mode): Promise<RoundFigures> {
  const app = new HelloApp(cluster.kubeConfig, `runlet-etcd-${mode}`);
  await app.apply();
  const pod = await waitFor(async () => (await app.pods()).find(isReady), { what: `the ${mode} App's pod Ready`, ...WAIT });
  const args = [...pod.spec!.containers, ...(pod.spec!.initContainers ?? [])].flatMap((container) => container.args ?? []);
  const store = args[args.indexOf('--run-store') + 1];
  if (store !== mode) throw new Error(`the App's sidecar runs --run-store ${store}, not ${mode}`);
  const { runUrl } = await cluster.sidecar(pod);
  const token = await cluster.token(app.namespace);
  // Not needed by the load: the runs are listed as a check that they were stored where the mode says.
  await cluster.kubeConfig.makeApiClient(RbacAuthorizationV1Api).createNamespacedRoleBinding({
    namespace: app.namespace,
    body: {
      metadata: { name: 'default-runs-viewer' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'runlet-runs-viewer' },
      subjects: [{ kind: 'ServiceAccount', name: 'default', namespace: app.namespace }],
    },
  });
  const load = (durationS: number) =>
    runAutocannon({
      url: `${runUrl}/v4/${app.namespace}/hello/run`,
      connections: CONNECTIONS,
      overallRate: RATE,
      durationS,
      body: '{"name":"etcd"}',
      headers: { authorization: `Bearer ${token}` },
    });
  await load(WARM_UP_S);
  const etcdBefore = await etcdReceivedBytes(cluster);
  const from = Date.now();
  const measured = await load(WINDOW_S);
  const to = Date.now();
  const etcdAfter = await etcdReceivedBytes(cluster);
  if (measured.errors > 0) throw new Error(`${measured.errors} of ${measured.requests} sync calls failed during the ${mode} window`);
  const sidecarPid = cluster.kubelet.pod(pod.metadata!.name!, app.namespace)?.processes().find((process) => process.container === SIDECAR_CONTAINER)?.pid;
  if (sidecarPid === undefined) throw new Error(`the sidecar of pod ${pod.metadata!.name} runs no process`);
  const sidecarRssMiB = readRssSplit(sidecarPid).rssKb / 1024;
  await listed(cluster, app);

  // Writes answered after the window's end are still being written: their lines follow once the load is over.
  const writers = new Set([`system:serviceaccount:${app.namespace}:${SIDECAR_SERVICE_ACCOUNT}`, `system:serviceaccount:${OPERATOR.namespace}:${OPERATOR.serviceAccount}`]);
  const writes = readAudit(cluster.controlPlane.auditLogPath!).filter((event) => {
    const at = Date.parse(event.requestReceivedTimestamp);
    return event.stage === 'ResponseComplete' && WRITE_VERBS.has(event.verb) && writers.has(event.user.username) && at >= from && at < to;
  });
  const seconds = (to - from) / 1000;
  const size = (value: unknown) => (value === undefined ? 0 : Buffer.byteLength(JSON.stringify(value)));
  const byKind = new Map<string, WriteTally>();
  for (const event of writes) {
    const who = event.user.username.endsWith(`:${SIDECAR_SERVICE_ACCOUNT}`) ? 'sidecar' : 'operator';
    const what = [event.objectRef?.resource, event.objectRef?.subresource].filter(Boolean).join('/');
    const key = `${who} ${event.verb} ${what}`;
    const entry = byKind.get(key) ?? { who, what, count: 0, stored: 0, request: 0 };
    entry.count += 1;
    entry.stored += size(event.responseObject);
    entry.request += size(event.requestObject);
    byKind.set(key, entry);
  }
  for (const [key, entry] of byKind) {
    process.stdout.write(
      `bench: etcd-writes ${mode}: ${key}: ${(entry.count / seconds).toFixed(2)}/s, stored ${(entry.stored / entry.count / 1000).toFixed(1)} kB each, request ${(entry.request / entry.count / 1000).toFixed(1)} kB each\n`,
    );
  }
  // The operator renews its leader Lease whatever the Apps do (here every 0.2 s, the tier's retry period).
  const perSecond = (who: WriteTally['who'], pick: (entry: WriteTally) => number) =>
    [...byKind.values()].filter((entry) => entry.who === who && entry.what !== 'leases').reduce((sum, entry) => sum + pick(entry), 0) / seconds;
  return {
    [`etcd.${mode}.sidecarWritesPerSecond`]: perSecond('sidecar', (entry) => entry.count),
    [`etcd.${mode}.sidecarStoredKBPerSecond`]: perSecond('sidecar', (entry) => entry.stored) / 1000,
    [`etcd.${mode}.sidecarRequestKBPerSecond`]: perSecond('sidecar', (entry) => entry.request) / 1000,
    [`etcd.${mode}.operatorWritesPerSecond`]: perSecond('operator', (entry) => entry.count),
    [`etcd.${mode}.operatorStoredKBPerSecond`]: perSecond('operator', (entry) => entry.stored) / 1000,
    [`etcd.${mode}.etcdReceivedKBPerSecond`]: (etcdAfter - etcdBefore) / 1000 / seconds,
    [`etcd.${mode}.callsPerSecond`]: measured.ok / measured.seconds,
    [`etcd.${mode}.sidecarRssMiB`]: sidecarRssMiB,
  };
}

interface WriteTally {
  who: 'sidecar' | 'operator';
  /** resource, or resource/subresource */
  what: string;
  count: number;
  stored: number;
  request: number;
}

/** The management API lists the App's runs (from the RunLog cache, or PostgreSQL): the load's runs were kept. */
async function listed(cluster: ControlPlaneCluster, app: HelloApp): Promise<void> {
  const reader = await cluster.serviceAccountToken(app.namespace, 'default');
  await waitFor(
    async () => {
      const response = await fetch(`${cluster.operatorUrl}/v2/projects/${app.namespace}/apps/hello/runs?pageSize=1`, { headers: { authorization: `Bearer ${reader}` } });
      return response.status === 200 && ((await response.json()) as { items: unknown[] }).items.length === 1;
    },
    { what: `the runs of ${app.namespace} listed`, ...WAIT },
  );
}

function readAudit(path: string): AuditEvent[] {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as AuditEvent);
}

/** etcd_network_client_grpc_received_bytes_total of the tier's etcd (its client port is in the control plane's ports file). */
async function etcdReceivedBytes(cluster: ControlPlaneCluster): Promise<number> {
  const ports = readFileSync(join(cluster.controlPlane.dir, 'ports'), 'utf8');
  const port = /^ETCD_PORT=(\d+)$/m.exec(ports)?.[1];
  if (port === undefined) throw new Error(`no ETCD_PORT in ${cluster.controlPlane.dir}/ports`);
  const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const value = /^etcd_network_client_grpc_received_bytes_total (\S+)$/m.exec(metrics)?.[1];
  if (value === undefined) throw new Error(`etcd on port ${port} reports no etcd_network_client_grpc_received_bytes_total`);
  return Number(value);
}
