// What the RunLog store's tests share: the in-memory API server with the Runlet CRDs and an App, stores with
// their journal in a data dir of their own (or one a previous store left), run records, a log that can be read
// back, a clock the tests move by hand, and bounded waits on the API server's state.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request as httpsRequest } from 'node:https';
import pino, { type Logger } from 'pino';
import { Registry } from 'prom-client';
import { pythonApp } from './crd-fixtures.ts';
import { startKubeApiServer, type KubeApiServer } from '../kube/index.ts';
import type { RunRecord, RunStatus } from '../../crds/run-record-schema.ts';
import type { RunLogLoad } from '../../crds/runlog-schema.ts';
import type { KubeObject } from '../../kube/objects.ts';
import { paths, prepareCluster } from './fake-cluster.ts';
import { newRunId } from '../../run-request/run-id.ts';
import { RunLogJournal } from '../../sidecar/runs/runlog-journal.ts';
import { isFinished } from '../../sidecar/runs/runlog-window.ts';
import { RunLogStore, type RunLogStoreOptions } from '../../sidecar/runs/runlog-store.ts';
import type { RunLogTimers, TimerHandle } from '../../sidecar/runs/runlog-timers.ts';

export const NAMESPACE = 'team-a';
export const APP_NAME = 'hello';
export const POD_NAME = 'hello-7d9c-abcde';
const RUNLOG_PATH = `/apis/runlet.dev/v1alpha1/namespaces/${NAMESPACE}/runlogs/${POD_NAME}`;

/** Generous: the tests must pass on a loaded 2-core machine; they only wait this long when failing. */
export const WAIT_MS = 15_000;

export interface RunLogJson {
  metadata: {
    resourceVersion: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: { apiVersion: string; kind: string; name: string; uid: string; controller?: boolean }[];
  };
  spec: { appName: string };
  status?: { runs?: RunRecord[]; counts?: { total: number; success: number; failure: number; inFlight: number }; load?: RunLogLoad };
}

export interface Cluster {
  server: KubeApiServer;
  appUid: string;
  readRunLog(): Promise<RunLogJson | undefined>;
  /** Merge-patches the RunLog's status as another writer would, at its current version. */
  patchStatusAsOther(change: (status: NonNullable<RunLogJson['status']>) => void): Promise<void>;
  deleteRunLog(): Promise<void>;
}

/** The fake cluster (fake-cluster.ts) with App `hello` created in `team-a`. */
export async function startCluster(options: { keepFinished?: number } = {}): Promise<Cluster> {
  const { server, api } = await prepareCluster(await startKubeApiServer({ namespaces: [NAMESPACE] }));
  const call = async (method: string, path: string, body?: unknown, contentType = 'application/json'): Promise<unknown> => {
    const response = await request(server, path, method, body === undefined ? undefined : JSON.stringify(body), contentType);
    if (response.status >= 300) throw new Error(`test: ${method} ${path} answered ${response.status}: ${response.text}`);
    return JSON.parse(response.text);
  };
  const app = pythonApp();
  app.spec.runs.keepFinished = options.keepFinished ?? 200;
  const created = await api.create(paths.app(NAMESPACE), app as KubeObject);
  // The pooled client is done with: the tests' own requests below each take a connection of their own.
  await api.close();

  const readRunLog = async (): Promise<RunLogJson | undefined> => {
    const response = await request(server, RUNLOG_PATH, 'GET');
    if (response.status === 404) return undefined;
    if (response.status !== 200) throw new Error(`test: GET RunLog answered ${response.status}: ${response.text}`);
    return JSON.parse(response.text) as RunLogJson;
  };
  return {
    server,
    appUid: created.metadata!.uid!,
    readRunLog,
    async patchStatusAsOther(change) {
      const current = await readRunLog();
      if (current === undefined) throw new Error('test: no RunLog to change');
      const status = structuredClone(current.status ?? {});
      change(status);
      const patch = { metadata: { resourceVersion: current.metadata.resourceVersion }, status };
      await call('PATCH', `${RUNLOG_PATH}/status`, patch, 'application/merge-patch+json');
    },
    async deleteRunLog() {
      await call('DELETE', RUNLOG_PATH);
    },
  };
}

/**
 * One request on a connection of its own: pause('refuse') resets pooled connections, and a pooled one the
 * client has not yet seen closed would fail the test's next read.
 */
function request(server: KubeApiServer, path: string, method: string, body?: string, contentType = 'application/json'): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const headers = body === undefined ? {} : { 'content-type': contentType };
    const outgoing = httpsRequest(server.url + path, { method, agent: false, ca: server.ca, headers }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, text }));
      response.on('error', reject);
    });
    outgoing.on('error', reject);
    outgoing.end(body);
  });
}

export interface LogLine {
  level: number;
  msg: string;
  [field: string]: unknown;
}

export const WARN = 40;

/** A pino logger whose lines the test can read. */
export function captureLogger(): { logger: Logger; lines: LogLine[] } {
  const lines: LogLine[] = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line) as LogLine) });
  return { logger, lines };
}

export interface TestStore {
  store: RunLogStore;
  registry: Registry;
  lines: LogLine[];
  /** The store's data dir, where its journal is. */
  dataDir: string;
}

/** A temporary data dir; the caller removes it (removeDataDir). */
export function makeDataDir(): Promise<string> {
  return mkdtemp(join(tmpdir(), 'runlet-runlog-'));
}

export function removeDataDir(dataDir: string): Promise<void> {
  return rm(dataDir, { recursive: true, force: true });
}

export type TestStoreOptions = Partial<Omit<RunLogStoreOptions, 'journal'>> & {
  /** The data dir of the store's journal: a new one when omitted (a previous store's to take over from it). */
  dataDir?: string;
};

export async function createStore(cluster: Cluster, options: TestStoreOptions = {}): Promise<TestStore> {
  const { dataDir = await makeDataDir(), ...storeOptions } = options;
  const { logger, lines } = captureLogger();
  const registry = new Registry();
  const journal = await RunLogJournal.open({ dataDir, logger });
  const store = new RunLogStore({
    credentials: await cluster.server.credentials(),
    namespace: NAMESPACE,
    podName: POD_NAME,
    appName: APP_NAME,
    journal,
    registry,
    logger,
    ...storeOptions,
  });
  return { store, registry, lines, dataDir };
}

/** A run record in `status`, created now; finished runs are completed now too. */
export function runRecord(status: RunStatus, overrides: Partial<RunRecord> = {}): RunRecord {
  const now = new Date().toISOString();
  const finished = isFinished(status);
  return {
    id: newRunId(),
    projectId: NAMESPACE,
    appName: APP_NAME,
    functionName: 'run',
    method: 'POST',
    mode: 'sync',
    async: false,
    status,
    statusCode: finished ? (status === 'failure' ? 500 : 200) : null,
    error: null,
    reason: null,
    createdAt: now,
    startedAt: status === 'pending' ? null : now,
    completedAt: finished ? now : null,
    queueTimeMs: status === 'pending' ? null : 1,
    runtimeMs: finished ? 2 : null,
    responseTimeMs: finished ? 3 : null,
    replica: POD_NAME,
    webhook: null,
    ...overrides,
  };
}

export function runIds(runLog: RunLogJson | undefined): string[] {
  return (runLog?.status?.runs ?? []).map((run) => run.id);
}

/** Lets pending I/O callbacks run. */
export function yieldToIo(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** A clock that moves only when the test says, firing due timers in time order. */
export class ManualTimers implements RunLogTimers {
  #now = 0;
  #nextId = 1;
  readonly #due = new Map<number, { at: number; callback: () => void }>();

  now(): number {
    return this.#now;
  }

  setTimeout(callback: () => void, delayMs: number): TimerHandle {
    const id = this.#nextId++;
    this.#due.set(id, { at: this.#now + Math.max(0, delayMs), callback });
    return id;
  }

  clearTimeout(handle: TimerHandle): void {
    this.#due.delete(handle as number);
  }

  advance(ms: number): void {
    const until = this.#now + ms;
    for (;;) {
      let next: [number, { at: number; callback: () => void }] | undefined;
      for (const entry of this.#due) if (entry[1].at <= until && (next === undefined || entry[1].at < next[1].at)) next = entry;
      if (next === undefined) break;
      this.#due.delete(next[0]);
      this.#now = next[1].at;
      next[1].callback();
    }
    this.#now = until;
  }

  /**
   * Lets I/O run until `promise` settles (bounded in real time), moving the clock a millisecond per turn so
   * timers armed meanwhile (a follow-up write) come due.
   */
  async drive<T>(promise: Promise<T>, timeoutMs = WAIT_MS): Promise<T> {
    let settled = false;
    const tracked = promise.finally(() => {
      settled = true;
    });
    const deadline = performance.now() + timeoutMs;
    while (!settled) {
      if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms driving the manual clock`);
      this.advance(1);
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
    return tracked;
  }
}
