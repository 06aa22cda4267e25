// The holder: where the Endpoints of an App at zero replicas point (endpoints.ts), so it receives exactly the
// calls that found no replica. It authenticates them as a sidecar would, wakes the app (hold-wake.ts), and
//   sync / stream ─▶ waits for a ready pod (bounded by the cold-start limit; beyond it 503 + Retry-After)
//                    ─▶ relays the call to that pod's sidecar (hold-proxy.ts)
//   async         ─▶ durable record (hold-records.ts: in the holder's namespace, no token) ─▶ 202 {run_id} at
//                    once ─▶ handed over (hold-dispatch.ts); a sweep drops the records of deleted Apps and
//                    expired ones, and hands over those a dead holder replica left
// Every hand-over carries the run id and the wait, signed with the App namespace's key (sidecar/auth/held-run.ts),
// for the run record.
// It runs in every operator replica; nothing in it needs the leader.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parse as parseQuery } from 'node:querystring';
import type { V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { App } from '../../crds/app-schema.ts';
import { ProblemError } from '../../crds/problem.ts';
import { Problems } from '../../crds/problems.ts';
import type { KubeApi } from '../../kube/client.ts';
import type { RunAuthenticator } from '../../sidecar/auth/authenticator.ts';
import { HELD_RUN_HEADER, heldRunHeader } from '../../sidecar/auth/held-run.ts';
import { sendProblem } from '../../sidecar/exchange.ts';
import { acceptsEventStream } from '../../sidecar/http-negotiation.ts';
import { readLimitedBody } from '../../sidecar/request-body.ts';
import { DEFAULT_REQUEST_BODY_TIMEOUT_MS, DEFAULT_REQUEST_DEADLINE_MS } from '../../sidecar/request-timeouts.ts';
import { NO_OPTIONS, parseRunOptions } from '../../sidecar/run-options.ts';
import { parseRunPath, pathOf } from '../../sidecar/run-path.ts';
import { newRunId } from '../../sidecar/runs/recorder.ts';
import { SIDECAR_RUN_PORT, childName } from '../render/names.ts';
import { createDispatcher, type DroppedWhy } from './hold-dispatch.ts';
import { ReadyPods } from './hold-pods.ts';
import { relayCall, type ReplicaAddress } from './hold-proxy.ts';
import { HELD_CALL_LABEL, HELD_CALL_NAMESPACE_LABEL, HeldRecords, type HeldCall, type HeldRecord } from './hold-records.ts';
import { wakeDeployment } from './hold-wake.ts';

/** The cold-start limit when the App sets none (`[scaling] cold_start_timeout`). */
export const DEFAULT_COLD_START_TIMEOUT_SECONDS = 60;
/**
 * The largest body of an async call held at zero. Its record is a Secret, whose data the API server takes up to
 * 1 MiB in all; the call's other fields (its URL with the query, a few headers) fit in the rest. A larger body
 * is refused at once (413) rather than accepted and lost when its record cannot be written.
 */
export const HELD_ASYNC_BODY_LIMIT_BYTES = 960 * 1024;
/**
 * The headers of an async call kept in its record: what the replica needs to run it as the caller asked. Not
 * its Authorization: the holder authenticated the caller, and the record says so instead (hold-records.ts).
 */
const KEPT_HEADERS = ['content-type', 'accept', 'x-webhook-secret'] as const;
/** How long a held async call is kept at most when the configuration says nothing. */
export const DEFAULT_HELD_CALL_TTL_MS = 24 * 3600_000;
const DEFAULT_SWEEP_INTERVAL_MS = 60_000;
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
  /** Where held async calls are recorded: the holder's own namespace (its Role grants Secrets there). */
  recordsNamespace: string;
  /** A held async call not handed over within this long is dropped. Default 24 h. */
  heldCallTtlMs?: number;
  /** How often the records are swept (expired, of deleted Apps, left by a dead replica). Default 1 min. */
  sweepIntervalMs?: number;
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
  /**
   * Sweeps the held async calls in the API server: drops those past their expiry or of an App that is gone, and
   * hands over those no live holder holds (a restarted holder's, or a dead replica's); how many it took.
   */
  recover(): Promise<number>;
  /** The App is deleted: its held async calls go with it. */
  appDeleted(namespace: string, appName: string): Promise<void>;
  close(): Promise<void>;
}

function configuredColdStartMs(app: App): number {
  // The App cache holds what the API server stored, which an older server may not have defaulted.
  return (app.spec.scaling?.coldStartTimeout ?? DEFAULT_COLD_START_TIMEOUT_SECONDS) * 1000;
}

/** The App a record is for: `[namespace, name]`. */
function appOf(record: HeldRecord): [string, string] {
  const labels = record.metadata?.labels ?? {};
  return [labels[HELD_CALL_NAMESPACE_LABEL] ?? '', labels[HELD_CALL_LABEL] ?? ''];
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
  const records = new HeldRecords({
    api,
    namespace: options.recordsNamespace,
    identity: options.identity,
    staleClaimMs: options.staleClaimMs ?? 5 * 60_000,
    ttlMs: options.heldCallTtlMs ?? DEFAULT_HELD_CALL_TTL_MS,
    keys: holderKeys,
  });
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
    onAltered: (record) => metrics?.dropped(...appOf(record), 'altered'),
    onHandedOver: (call, coldStartMs) => {
      stats.handedOver += 1;
      metrics?.handedOver(call.namespace, call.appName, 'async', coldStartMs);
    },
  });
  const handOvers = new Set<Promise<void>>();
  /** The names of the records this replica is handing over now: a sweep leaves them be. */
  const inHand = new Set<string>();
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
  function handOver(record: HeldRecord): void {
    const name = record.metadata!.name!;
    inHand.add(name);
    const pending = counted(...appOf(record), dispatcher.handOver(record)).finally(() => {
      handOvers.delete(pending);
      inHand.delete(name);
    });
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
    const authenticates = auth !== null && app?.spec.auth?.enabled !== false;
    if (authenticates) {
      const pending = auth.authenticate(request.headers.authorization, projectId);
      if (pending) await pending;
    }
    if (app === undefined) throw new ProblemError(Problems.appNotFound, `No app named "${appName}" in project "${projectId}"`);
    const queryStart = url.indexOf('?');
    const runOptions = queryStart === -1 ? NO_OPTIONS : parseRunOptions(parseQuery(url.slice(queryStart + 1)));

    if (runOptions.async) {
      const body = await readLimitedBody(request, { limitBytes: HELD_ASYNC_BODY_LIMIT_BYTES, idleMs: DEFAULT_REQUEST_BODY_TIMEOUT_MS, deadlineMs: DEFAULT_REQUEST_DEADLINE_MS, budget: null }).catch((error: unknown) => {
        if (!(error instanceof ProblemError) || error.status !== Problems.bodyTooLarge.status) throw error;
        throw new ProblemError(
          Problems.bodyTooLarge,
          `"${appName}" has no replica running, and an async call is kept until one is up in a Kubernetes Secret, which limits its body to ${HELD_ASYNC_BODY_LIMIT_BYTES} bytes; call it synchronously, or once a replica is up`,
          { cause: error, headers: error.headers },
        );
      });
      const headers: Record<string, string> = {};
      for (const name of KEPT_HEADERS) {
        const value = request.headers[name];
        if (typeof value === 'string') headers[name] = value;
      }
      const call: HeldCall = { runId, namespace: projectId, appName, method: request.method ?? 'POST', url, headers, body, acceptedAt: Date.now(), authenticatedProject: authenticates ? projectId : null };
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

  async function sweep(): Promise<number> {
    await options.appsSynced();
    let claimed = 0;
    for (const record of await records.all()) {
      const [namespace, appName] = appOf(record);
      const what = { app: `${namespace}/${appName}`, record: record.metadata?.name };
      if (apps.get(namespace, appName) === undefined) {
        logger.warn(what, 'holder: the app of a held async call is gone; dropping the call');
        await records.remove(record);
      } else if (records.expired(record)) {
        logger.error(what, 'holder: a held async call outlived its expiry without reaching a replica; dropping it (no run is recorded)');
        metrics?.dropped(namespace, appName, 'expired');
        await records.remove(record);
      } else if (!inHand.has(record.metadata!.name!) && records.mayClaim(record)) {
        const mine = await records.claim(record);
        if (mine === null) continue;
        claimed += 1;
        handOver(mine);
      }
    }
    return claimed;
  }
  const sweeps = setInterval(() => {
    sweep().catch((error: unknown) => logger.warn({ err: error }, 'holder: sweeping the held async calls failed; trying again at the next sweep'));
  }, options.sweepIntervalMs ?? DEFAULT_SWEEP_INTERVAL_MS);
  sweeps.unref();

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
    recover: sweep,
    async appDeleted(namespace, appName) {
      for (const record of await records.ofApp(namespace, appName)) {
        logger.warn({ app: `${namespace}/${appName}`, record: record.metadata?.name }, 'holder: the app of a held async call was deleted; dropping the call');
        await records.remove(record);
      }
    },
    async close() {
      clearInterval(sweeps);
      dispatcher.stop();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await pods.stop();
      await Promise.all(handOvers);
    },
  };
}
