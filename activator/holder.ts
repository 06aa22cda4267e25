// The holder: where the Endpoints of an App at zero replicas point (endpoints.ts), so it receives exactly the
// calls that found no replica. It authenticates them as a sidecar would, wakes the app (hold-wake.ts), and
//   sync / stream ─▶ waits for a ready pod (bounded by the cold-start limit; beyond it 503 + Retry-After)
//                    ─▶ relays the call to that pod's sidecar (hold-proxy.ts)
//   async         ─▶ durable record (hold-records.ts) ─▶ 202 {run_id} at once ─▶ handed over (hold-dispatch.ts)
// Every hand-over carries the run id and the wait, signed with the App namespace's key (run-request/auth/held-run.ts),
// for the run record.
// It runs in every operator replica; nothing in it needs the leader.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parse as parseQuery } from 'node:querystring';
import type { V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { App } from '../crds/app-schema.ts';
import { ProblemError } from '../crds/problem.ts';
import { Problems } from '../crds/problems.ts';
import type { KubeApi } from '../kube/client.ts';
import type { RunAuthenticator } from '../run-request/auth/authenticator.ts';
import { HELD_RUN_HEADER, heldRunHeader } from '../run-request/auth/held-run.ts';
import { sendProblem } from '../run-request/problem-answer.ts';
import { acceptsEventStream } from '../run-request/http-negotiation.ts';
import { DEFAULT_BODY_LIMIT_BYTES, readLimitedBody } from '../run-request/request-body.ts';
import { DEFAULT_REQUEST_BODY_TIMEOUT_MS, DEFAULT_REQUEST_DEADLINE_MS } from '../run-request/request-timeouts.ts';
import { NO_OPTIONS, parseRunOptions } from '../run-request/run-options.ts';
import { parseRunPath, pathOf } from '../run-request/run-path.ts';
import { newRunId } from '../run-request/run-id.ts';
import { SIDECAR_RUN_PORT, childName } from '../operator/render/names.ts';
import { createDispatcher, type DroppedWhy } from './hold-dispatch.ts';
import { ReadyPods } from './hold-pods.ts';
import { relayCall, type ReplicaAddress } from './hold-proxy.ts';
import { HELD_CALL_LABEL, HeldRecords, type HeldCall } from './hold-records.ts';
import { wakeDeployment } from './hold-wake.ts';

/** The cold-start limit when the App sets none (`[scaling] cold_start_timeout`). */
export const DEFAULT_COLD_START_TIMEOUT_SECONDS = 60;
/** The headers of an async call kept in its record: what the replica needs to run it as the caller asked. */
const KEPT_HEADERS = ['authorization', 'content-type', 'accept', 'x-webhook-secret'] as const;
const RETRY_AFTER_SECONDS = '5';

export interface HolderOptions {
  api: KubeApi;
  /** The App watch's cache. */
  apps: { get(namespace: string, name: string): App | undefined };
  /** Resolves once the App cache is filled. */
  appsSynced(): Promise<void>;
  /** As the sidecars authenticate callers (but not for an App with `spec.auth.enabled: false`); null: no authentication. */
  auth: RunAuthenticator | null;
  /** Each App namespace's key, shared with its sidecars: signs the run id and wait of each hand-over there (holder-key.ts). */
  holderKeys: (namespace: string) => Uint8Array;
  logger: Logger;
  /** This replica's name, for claims on held async calls. */
  identity: string;
  watchdogMs: number;
  host: string;
  port: number;
  /** Where a pod's sidecar run port is reached. Default: its pod IP, port 8000 (the test kubelet remaps). */
  replicaAddress?: (pod: V1Pod) => ReplicaAddress;
  /** Default: the App's `spec.scaling.coldStartTimeout`, else 60 s. */
  coldStartTimeoutMs?: (app: App) => number;
  /** Default 1 s. */
  retryDelayMs?: number;
  /** A claim on a held async call not renewed for this long is taken over by another holder. Default 5 min. */
  staleClaimMs?: number;
  /** Told of each held call's outcome and wait (the operator's metrics). */
  metrics?: HolderMetrics;
}

/** How a held call was called: the wait means different things for a caller that waits and one that does not. */
export type HeldMode = 'sync' | 'stream' | 'async';

export interface HolderMetrics {
  /** A held call reached a replica after `waitMs` (sync and stream: relayed; async: handed over). */
  handedOver(namespace: string, app: string, mode: HeldMode, waitMs: number): void;
  /** A sync or stream call found no ready replica within its App's cold-start limit (503). */
  timedOut(namespace: string, app: string, mode: HeldMode): void;
  /** An async call was recorded and answered 202. */
  accepted(namespace: string, app: string): void;
  /** An async call was dropped with no run recorded (hold-dispatch.ts). */
  dropped(namespace: string, app: string, why: DroppedWhy): void;
}

export interface HolderStats {
  /** Sync and stream calls relayed to a replica. */
  relayed: number;
  /** Sync and stream calls answered 503 cold-start-timeout. */
  timedOut: number;
  /** Async calls recorded and answered 202. */
  accepted: number;
  /** Async calls a replica accepted. */
  handedOver: number;
}

export interface Holder {
  readonly url: string;
  readonly stats: HolderStats;
  /** Calls to the App waiting here for a replica now (sync and stream calls, async calls not yet handed over): the scaler's `held`. */
  held(namespace: string, appName: string): number;
  /** Hands over the held async calls found in the API server (a restarted holder's, or a dead replica's). */
  recover(): Promise<number>;
  close(): Promise<void>;
}

function configuredColdStartMs(app: App): number {
  // The App cache holds what the API server stored, which an older server may not have defaulted.
  return (app.spec.scaling?.coldStartTimeout ?? DEFAULT_COLD_START_TIMEOUT_SECONDS) * 1000;
}

function podAddress(pod: V1Pod): ReplicaAddress {
  return { host: pod.status!.podIP!, port: SIDECAR_RUN_PORT };
}

export async function startHolder(options: HolderOptions): Promise<Holder> {
  const { api, apps, auth, logger, holderKeys } = options;
  const replicaAddress = options.replicaAddress ?? podAddress;
  const coldStartTimeoutMs = options.coldStartTimeoutMs ?? configuredColdStartMs;
  const stats: HolderStats = { relayed: 0, timedOut: 0, accepted: 0, handedOver: 0 };
  const metrics = options.metrics;
  const pods = new ReadyPods({ api, logger, watchdogMs: options.watchdogMs });
  const records = new HeldRecords({ api, identity: options.identity, staleClaimMs: options.staleClaimMs ?? 5 * 60_000 });
  const wake = (namespace: string, appName: string) =>
    wakeDeployment(api, namespace, appName).then((woke) => {
      if (woke) logger.info({ app: `${namespace}/${appName}` }, 'holder: woke the app (replicas 0 → 1)');
    });
  const dispatcher = createDispatcher({
    apps,
    appsSynced: options.appsSynced,
    records,
    pods,
    wake,
    replicaAddress,
    coldStartTimeoutMs,
    holderKeys,
    logger,
    retryDelayMs: options.retryDelayMs ?? 1000,
    onDropped: (call, why) => metrics?.dropped(call.namespace, call.appName, why),
    onHandedOver: (call, coldStartMs) => {
      stats.handedOver += 1;
      metrics?.handedOver(call.namespace, call.appName, 'async', coldStartMs);
    },
  });
  const handOvers = new Set<Promise<void>>();
  /** `namespace/app` → calls waiting for a replica. */
  const waiting = new Map<string, number>();
  function counted<T>(namespace: string, appName: string, work: Promise<T>): Promise<T> {
    const key = `${namespace}/${appName}`;
    waiting.set(key, (waiting.get(key) ?? 0) + 1);
    return work.finally(() => {
      const left = (waiting.get(key) ?? 1) - 1;
      if (left === 0) waiting.delete(key);
      else waiting.set(key, left);
    });
  }
  function handOver(record: Parameters<typeof dispatcher.handOver>[0]): void {
    const appName = record.metadata?.labels?.[HELD_CALL_LABEL] ?? '';
    const pending = counted(record.metadata?.namespace ?? '', appName, dispatcher.handOver(record)).finally(() => handOvers.delete(pending));
    handOvers.add(pending);
  }

  async function hold(request: IncomingMessage, response: ServerResponse, runId: string): Promise<void> {
    const arrivedAt = performance.now();
    const url = request.url ?? '/';
    const route = parseRunPath(pathOf(url));
    if (route === null) throw new ProblemError(Problems.routeNotFound, `${request.method} ${pathOf(url)} is not a route of the run interface`);
    const { projectId, appName } = route;
    await options.appsSynced();
    const app = apps.get(projectId, appName);
    // As the App's sidecars would (`--auth on|off` from spec.auth.enabled); callers of an App that does not
    // exist are authenticated too, so that none learns which Apps exist without a token.
    if (auth && app?.spec.auth?.enabled !== false) {
      const pending = auth.authenticate(request.headers.authorization, projectId);
      if (pending) await pending;
    }
    if (app === undefined) throw new ProblemError(Problems.appNotFound, `No app named "${appName}" in project "${projectId}"`);
    const queryStart = url.indexOf('?');
    const runOptions = queryStart === -1 ? NO_OPTIONS : parseRunOptions(parseQuery(url.slice(queryStart + 1)));

    if (runOptions.async) {
      const body = await readLimitedBody(request, { limitBytes: DEFAULT_BODY_LIMIT_BYTES, idleMs: DEFAULT_REQUEST_BODY_TIMEOUT_MS, deadlineMs: DEFAULT_REQUEST_DEADLINE_MS, budget: null });
      const headers: Record<string, string> = {};
      for (const name of KEPT_HEADERS) {
        const value = request.headers[name];
        if (typeof value === 'string') headers[name] = value;
      }
      const call: HeldCall = { runId, namespace: projectId, appName, method: request.method ?? 'POST', url, headers, body, acceptedAt: Date.now() };
      const record = await records.save(call);
      stats.accepted += 1;
      metrics?.accepted(projectId, appName);
      response.writeHead(202, { 'content-type': 'application/json', 'x-request-id': runId });
      response.end(JSON.stringify({ run_id: runId }));
      handOver(record);
      return;
    }

    await wake(projectId, childName(app));
    const limitMs = coldStartTimeoutMs(app);
    const pod = await counted(projectId, appName, pods.waitForReadyPod(projectId, appName, Math.max(0, limitMs - (performance.now() - arrivedAt))));
    const mode: HeldMode = acceptsEventStream(request.headers.accept) ? 'stream' : 'sync';
    if (pod === null) {
      stats.timedOut += 1;
      metrics?.timedOut(projectId, appName, mode);
      throw new ProblemError(Problems.coldStartTimeout, `No replica of "${appName}" became ready within its cold-start limit of ${limitMs / 1000} s; one is still starting`, {
        headers: { 'retry-after': RETRY_AFTER_SECONDS },
      });
    }
    const coldStartMs = performance.now() - arrivedAt;
    stats.relayed += 1;
    metrics?.handedOver(projectId, appName, mode, coldStartMs);
    // The body streams through, so the header signs none: it vouches for the run id and wait of this call, by this caller.
    const line = { method: request.method ?? 'POST', url, authorization: request.headers.authorization };
    await relayCall(request, response, replicaAddress(pod), { [HELD_RUN_HEADER]: heldRunHeader(holderKeys(projectId), { runId, coldStartMs }, line, null) });
  }

  const server: Server = createServer((request, response) => {
    const runId = newRunId();
    hold(request, response, runId).catch((error: unknown) => {
      const problem =
        error instanceof ProblemError
          ? error
          : new ProblemError(Problems.internalError, 'The holder failed to handle the call; the error is in the operator log', { cause: error });
      if (!(error instanceof ProblemError)) logger.error({ err: error, runId }, 'holder: a held call failed');
      sendProblem(response, runId, problem);
    });
  });
  pods.start();
  // The first call at zero would otherwise wait for the key set too.
  void auth?.prefetchKeys();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, resolve);
  });
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://${options.host.includes(':') ? `[${options.host}]` : options.host}:${port}`,
    stats,
    held: (namespace, appName) => waiting.get(`${namespace}/${appName}`) ?? 0,
    async recover() {
      const found = await records.claimable();
      let claimed = 0;
      for (const record of found) {
        const mine = await records.claim(record);
        if (mine === null) continue;
        claimed += 1;
        handOver(mine);
      }
      return claimed;
    },
    async close() {
      dispatcher.stop();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await pods.stop();
      await Promise.all(handOvers);
    },
  };
}
