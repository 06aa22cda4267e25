// The holder: where the Endpoints of an App at zero replicas point (endpoints.ts), so it receives exactly the
// calls that found no replica. It authenticates them as a sidecar would, takes a bounded place (hold-bounds.ts:
// past a bound, 503 at once), wakes the app with the replicas its waiting calls need (hold-wake.ts), and
//   sync / stream ─▶ reads the body, waits for a free slot on a ready pod (hold-slots.ts: at most
//                    replica_concurrency of its calls per pod), bounded by the cold-start limit (beyond it
//                    503 + Retry-After) ─▶ relays the call to that pod's sidecar (hold-proxy.ts); a refusal
//                    made before the run started (503 over-capacity) is tried again within that limit
//   async         ─▶ durable record (hold-records.ts: in the holder's namespace, no token) ─▶ 202 {run_id} at
//                    once ─▶ handed over (hold-dispatch.ts); a sweep drops the records of deleted Apps and
//                    expired ones, and hands over those a dead holder replica left
// Every hand-over carries the run id and the wait, signed with the App namespace's key (run-request/auth/held-run.ts),
// for the run record.
// It runs in every operator replica; nothing in it needs the leader.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parse as parseQuery } from 'node:querystring';
import type { Logger } from 'pino';
import type { App, AppSpec } from '../crds/app-schema.ts';
import { ProblemError } from '../crds/problem.ts';
import { Problems } from '../crds/problems.ts';
import { applyAppSpecDefaults } from '../crds/validate.ts';
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
import { WaitingCalls, type HeldDemand, type HeldLoadReport } from '../operator/autoscaling/held-demand.ts';
import { replicasForWaiting, scalingSettingsOf } from '../operator/autoscaling/settings.ts';
import { DEFAULT_HOLD_LIMITS, HoldBoundError, HoldBounds, type HeldPlace, type HoldBound, type HoldLimits } from './hold-bounds.ts';
import { createDispatcher, type DroppedWhy } from './hold-dispatch.ts';
import { ReadyReplicas, type HeldReplica } from './hold-replicas.ts';
import { relayBufferedCall, sendRefusal, type Refusal, type ReplicaAddress } from './hold-proxy.ts';
import { AlteredRecordError, HELD_CALL_LABEL, HELD_CALL_NAMESPACE_LABEL, HeldRecords, type HeldCall, type HeldRecord } from './hold-records.ts';
import { PodSlots } from './hold-slots.ts';
import { answerHoldControl, HeldCallIndex, HOLD_CONTROL_PREFIX, type HeldEntry } from './hold-control.ts';
import { HELD_CANCELLED_MESSAGE } from './hold-cancel.ts';
import { Waker, wakeDeployment } from './hold-wake.ts';

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
/** The pause before a call a replica refused before its run (its queue full) is tried again. */
const RELAY_RETRY_MS = 200;

export interface HolderOptions {
  api: KubeApi;
  /** The App watch's cache. */
  apps: { get(namespace: string, name: string): App | undefined };
  /** Resolves once the App cache is filled. */
  appsSynced(): Promise<void>;
  /** As the sidecars authenticate callers (but not for an App with `spec.auth.enabled: false`); null: no authentication. */
  auth: RunAuthenticator | null;
  /** Each App namespace's key, shared with its sidecars: signs the run id and wait of each hand-over there (holder-key.ts). */
  holderKeys: (namespace: string) => Promise<Uint8Array>;
  logger: Logger;
  /** This replica's name, for claims on held async calls. */
  identity: string;
  /**
   * Where held async calls are recorded: a namespace of their own, where the holder's Role grants Secrets (listing
   * them cannot be limited to some: anywhere else it would reach every Secret of that namespace).
   */
  recordsNamespace: string;
  /** A held async call not handed over within this long is dropped. Default 24 h. */
  heldCallTtlMs?: number;
  /** How often the records are swept (expired, of deleted Apps, left by a dead replica). Default 1 min. */
  sweepIntervalMs?: number;
  watchdogMs: number;
  host: string;
  port: number;
  /**
   * Where a ready replica's sidecar run port is reached. Default: its IP (from its App's Endpoints), port 8000 —
   * never the port the Endpoints say, which are the tenant's to edit (the test kubelet remaps).
   */
  replicaAddress?: (replica: HeldReplica) => ReplicaAddress;
  /** Default: the App's `spec.scaling.coldStartTimeout`, else 60 s. */
  coldStartTimeoutMs?: (app: App) => number;
  /** Default 1 s. */
  retryDelayMs?: number;
  /** A claim on a held async call not renewed for this long is taken over by another holder. Default 5 min. */
  staleClaimMs?: number;
  /** Told of each held call's outcome and wait (the operator's metrics). */
  metrics?: HolderMetrics;
  /** What it may hold: calls per App, in all, and bytes of their bodies. Default DEFAULT_HOLD_LIMITS. */
  limits?: Partial<HoldLimits>;
  /**
   * The holder control key (operator/autoscaling/holder-key.ts): with it, the operator may list the calls held
   * here and cancel one (hold-control.ts); without it, nobody may.
   */
  controlKey?: Uint8Array;
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
  /** A call was refused at once for the holder's `bound` (hold-bounds.ts): calls per App, per namespace or in all, or body bytes. */
  refused(namespace: string, app: string, mode: HeldMode, bound: HoldBound): void;
  /** A sync or stream call was cancelled while it waited (hold-control.ts): answered 409 run-cancelled. */
  cancelled(namespace: string, app: string, mode: HeldMode): void;
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
  /** Calls refused at once for a bound of the holder (503 over-capacity, or request-buffer-full for the bodies' bytes). */
  refused: number;
  /** Attempts of sync and stream calls a replica refused before the run started, tried again. */
  retried: number;
  /** Sync and stream calls cancelled while they waited (409 run-cancelled). */
  cancelled: number;
}

/** `held` (HeldDemand): the scaler's `held`, the demand the autoscaler adds to the replicas' load. */
export interface Holder extends HeldDemand {
  readonly url: string;
  readonly stats: HolderStats;
  /** Calls in the holder now (waiting, or relayed and not yet answered), all Apps together. */
  readonly calls: number;
  /** Bytes of held calls' bodies kept now, all Apps together. */
  readonly bodyBytes: number;
  /** The calls waiting, per App: what `runlet activator` answers at `/load` for the leader's autoscaler. */
  heldReport(): HeldLoadReport;
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

function sidecarAddress(replica: HeldReplica): ReplicaAddress {
  return { host: replica.ip, port: SIDECAR_RUN_PORT };
}

export async function startHolder(options: HolderOptions): Promise<Holder> {
  const { api, apps, auth, logger, holderKeys } = options;
  const replicaAddress = options.replicaAddress ?? sidecarAddress;
  const coldStartTimeoutMs = options.coldStartTimeoutMs ?? configuredColdStartMs;
  const stats: HolderStats = { relayed: 0, timedOut: 0, accepted: 0, handedOver: 0, refused: 0, retried: 0, cancelled: 0 };
  const metrics = options.metrics;
  const bounds = new HoldBounds({ ...DEFAULT_HOLD_LIMITS, ...options.limits });
  const replicas = new ReadyReplicas({ api, logger, watchdogMs: options.watchdogMs });
  const slots = new PodSlots(replicas);
  const records = new HeldRecords({
    api,
    namespace: options.recordsNamespace,
    identity: options.identity,
    staleClaimMs: options.staleClaimMs ?? 5 * 60_000,
    ttlMs: options.heldCallTtlMs ?? DEFAULT_HELD_CALL_TTL_MS,
    keys: holderKeys,
  });
  /** The calls held here, as the operator lists and cancels them (hold-control.ts). */
  const index = new HeldCallIndex();
  /** Calls waiting for a replica: the demand signal (Holder.held). */
  const waiting = new WaitingCalls();
  const waker = new Waker((namespace, deployment, replicas) =>
    wakeDeployment(api, namespace, deployment, replicas).then((from) => {
      if (from !== null) logger.info({ app: `${namespace}/${deployment}`, from, to: replicas }, `holder: woke the app (replicas ${from} → ${replicas})`);
    }),
  );
  /**
   * While no pod of the App is ready, asks for the replicas its waiting calls need (never fewer than asked
   * already); once one is, the autoscaler decides, fed the waiting calls as demand.
   */
  async function wake(namespace: string, appName: string): Promise<void> {
    const app = apps.get(namespace, appName);
    if (app === undefined) return;
    // Its namespace's replicas known first (their watch begun by the first call there), bounded by the cold start.
    await replicas.whenSynced(namespace, coldStartTimeoutMs(app));
    if (replicas.readyReplicas(namespace, appName).length > 0) return;
    const scaling = scalingSettingsOf((applyAppSpecDefaults(app.spec) as AppSpec).scaling);
    await waker.wake(namespace, childName(app), replicasForWaiting(waiting.held(namespace, appName), scaling));
  }
  const dispatcher = createDispatcher({
    apps,
    appsSynced: options.appsSynced,
    records,
    replicas,
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
  /**
   * Hands an async call's record over; its place and its body's bytes are the holder's until then. `call`, the
   * record read (null: altered at rest, dropped unread), is listed meanwhile.
   */
  function handOver(record: HeldRecord, call: HeldCall | null, place: HeldPlace, bodyBytes: number): void {
    const name = record.metadata!.name!;
    inHand.add(name);
    const stopWaiting = waiting.start(...appOf(record));
    let unlist = (): void => {};
    if (call !== null) {
      const entry: HeldEntry = { runId: call.runId, namespace: call.namespace, appName: call.appName, method: call.method, url: call.url, headers: {}, acceptedAt: call.acceptedAt, mode: 'async', forget: () => unlist() };
      unlist = index.add(entry);
    }
    const pending = dispatcher
      .handOver(record)
      .finally(() => {
        stopWaiting();
        unlist();
        place.release();
        bounds.bodies(appOf(record)[0]).give(bodyBytes);
        handOvers.delete(pending);
        inHand.delete(name);
      });
    handOvers.add(pending);
  }

  /**
   * A held call's body, read within its namespace's share of the holder's byte budget; its bytes stay taken until
   * `bounds.bodies(namespace).give`.
   */
  async function readBody(request: IncomingMessage, namespace: string, limitBytes = DEFAULT_BODY_LIMIT_BYTES): Promise<Buffer> {
    const budget = bounds.bodies(namespace);
    const body = await readLimitedBody(request, { limitBytes, idleMs: DEFAULT_REQUEST_BODY_TIMEOUT_MS, deadlineMs: DEFAULT_REQUEST_DEADLINE_MS, budget });
    // readLimitedBody gives back what it took once the body is whole; it is kept here until handed over.
    budget.takeAnyway(body.length);
    return body;
  }

  async function hold(request: IncomingMessage, response: ServerResponse, runId: string): Promise<void> {
    const arrivedAt = performance.now();
    // Watched before the first await: a 'close' missed while the body is read or the app woken would leave the
    // call held, its place and body taken, until its cold-start limit.
    const gone = new AbortController();
    const hungUp = new Promise<'gone'>((resolve) => gone.signal.addEventListener('abort', () => resolve('gone'), { once: true }));
    response.once('close', () => gone.abort());
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
    const mode: HeldMode = runOptions.async ? 'async' : acceptsEventStream(request.headers.accept) ? 'stream' : 'sync';
    const place = countingRefusals(mode, projectId, appName, () => bounds.take(projectId, appName));

    if (runOptions.async) {
      let body: Buffer;
      try {
        body = await countingRefusals(mode, projectId, appName, () => readBody(request, projectId, HELD_ASYNC_BODY_LIMIT_BYTES)).catch((error: unknown) => {
          if (!(error instanceof ProblemError) || error.status !== Problems.bodyTooLarge.status) throw error;
          throw new ProblemError(
            Problems.bodyTooLarge,
            `"${appName}" has no replica running, and an async call is kept until one is up in a Kubernetes Secret, which limits its body to ${HELD_ASYNC_BODY_LIMIT_BYTES} bytes; call it synchronously, or once a replica is up`,
            { cause: error, headers: error.headers },
          );
        });
      } catch (error) {
        place.release();
        throw error;
      }
      const headers: Record<string, string> = {};
      for (const name of KEPT_HEADERS) {
        const value = request.headers[name];
        if (typeof value === 'string') headers[name] = value;
      }
      const call: HeldCall = { runId, namespace: projectId, appName, method: request.method ?? 'POST', url, headers, body, acceptedAt: Date.now(), authenticatedProject: authenticates ? projectId : null };
      let record: Awaited<ReturnType<typeof records.save>>;
      try {
        record = await records.save(call);
      } catch (error) {
        place.release();
        bounds.bodies(projectId).give(body.length);
        throw error;
      }
      stats.accepted += 1;
      metrics?.accepted(projectId, appName);
      response.writeHead(202, { 'content-type': 'application/json', 'x-request-id': runId });
      response.end(JSON.stringify({ run_id: runId }));
      handOver(record, call, place, body.length);
      return;
    }

    const waits = { stop: waiting.start(projectId, appName) };
    // Listed while it waits, and cancellable: a cancel aborts its wait and answers it 409 run-cancelled.
    const cancelled = new AbortController();
    const secret = request.headers['x-webhook-secret'];
    const headers: Record<string, string> = typeof secret === 'string' ? { 'x-webhook-secret': secret } : {};
    const entry: HeldEntry = { runId, namespace: projectId, appName, method: request.method ?? 'POST', url, headers, acceptedAt: Date.now(), mode, cancel: () => cancelled.abort() };
    const unlist = index.add(entry);
    let bodyBytes = 0;
    try {
      // Read while the app starts; a failed wake is the call's failure, once its body has arrived (caught here
      // meanwhile: a rejection nobody awaits yet would end the process).
      const woken = wake(projectId, appName).then(
        () => null,
        (error: unknown) => error,
      );
      const body = await countingRefusals(mode, projectId, appName, () => readBody(request, projectId));
      bodyBytes = body.length;
      // A caller gone meanwhile is let go now, not once the wake ends (an API server slow to answer).
      const wakeFailed = await Promise.race([woken, hungUp]);
      if (wakeFailed === 'gone') return;
      if (wakeFailed !== null) throw wakeFailed;
      await relayWithinLimit(request, response, { runId, projectId, appName, app, arrivedAt, mode, body, waits, entry, cancelled: cancelled.signal, gone: gone.signal });
    } finally {
      unlist();
      waits.stop();
      place.release();
      bounds.bodies(projectId).give(bodyBytes);
    }
  }

  /**
   * `step`'s result; a refusal for the holder's bounds (a place, or its body's bytes) counted as such, by the bound
   * that refused it, and a body refused for its namespace's share said to be so.
   */
  function countingRefusals<T>(mode: HeldMode, namespace: string, appName: string, step: () => T): T {
    const refused = (error: unknown) => {
      if (error instanceof HoldBoundError) {
        stats.refused += 1;
        metrics?.refused(namespace, appName, mode, error.bound);
      } else if (error instanceof ProblemError && error.spec === Problems.requestBufferFull) {
        stats.refused += 1;
        const budget = bounds.bodies(namespace);
        const bound = budget.refusedBy ?? 'body_bytes';
        metrics?.refused(namespace, appName, mode, bound);
        if (bound === 'body_bytes_per_namespace') {
          const detail = `The holder holds ${budget.limitBytes} bytes of the bodies of calls to namespace "${namespace}" waiting for replicas, its limit per namespace; this one was not run. Retry shortly`;
          throw new ProblemError(Problems.requestBufferFull, detail, { cause: error, headers: error.headers });
        }
      }
      throw error;
    };
    try {
      const result = step();
      return (result instanceof Promise ? result.catch(refused) : result) as T;
    } catch (error) {
      return refused(error);
    }
  }

  interface HeldRelay {
    runId: string;
    projectId: string;
    appName: string;
    app: App;
    arrivedAt: number;
    mode: HeldMode;
    body: Buffer;
    /** Ends the call's count as waiting (Holder.held): while it is on a pod, it is that pod's load, not demand here. */
    waits: { stop(): void };
    /** Its listing: not cancellable here while it is relayed (it is the replica's then). */
    entry: { cancel?: () => void };
    /** Aborted by a cancel (hold-control.ts). */
    cancelled: AbortSignal;
    /** Aborted once its caller hung up: watched from the call's arrival, as the caller may go while its app wakes. */
    gone: AbortSignal;
  }

  /**
   * Relays a held sync or stream call to a free slot of a ready pod, trying again after a refusal made before the
   * run started, until its App's cold-start limit.
   */
  async function relayWithinLimit(request: IncomingMessage, response: ServerResponse, held: HeldRelay): Promise<void> {
    const { runId, projectId, appName, app, arrivedAt, mode } = held;
    const limitMs = coldStartTimeoutMs(app);
    const spec = applyAppSpecDefaults(app.spec) as AppSpec;
    const perPod = spec.scaling.replicaConcurrency;
    // A Python app's problem answers are its sidecar's; a custom app's may be its own server's, after its run.
    const sidecarAnswers = spec.runtime.custom === undefined;
    const { gone } = held;
    const stopped = AbortSignal.any([gone, held.cancelled]);
    const cancel = held.entry.cancel;
    let lastRefusal: Refusal | null = null;
    const cancelledProblem = (): ProblemError => {
      stats.cancelled += 1;
      metrics?.cancelled(projectId, appName, mode);
      return new ProblemError(Problems.runCancelled, HELD_CANCELLED_MESSAGE);
    };
    for (;;) {
      if (held.cancelled.aborted) throw cancelledProblem();
      const slot = await slots.acquire(projectId, appName, perPod, Math.max(0, limitMs - (performance.now() - arrivedAt)), stopped);
      if (slot === null) {
        if (held.cancelled.aborted) throw cancelledProblem();
        if (gone.aborted) return;
        if (lastRefusal !== null) return sendRefusal(response, lastRefusal);
        stats.timedOut += 1;
        metrics?.timedOut(projectId, appName, mode);
        const why =
          replicas.readyReplicas(projectId, appName).length === 0
            ? `No replica of "${appName}" became ready within its cold-start limit of ${limitMs / 1000} s; one is still starting`
            : `The ready replicas of "${appName}" had no room for the call within its cold-start limit of ${limitMs / 1000} s (${perPod} calls at once each); retry shortly`;
        throw new ProblemError(Problems.coldStartTimeout, why, { headers: { 'retry-after': RETRY_AFTER_SECONDS } });
      }
      held.waits.stop();
      held.entry.cancel = undefined;
      const coldStartMs = performance.now() - arrivedAt;
      // The body is sent whole, but unsigned (-) as a streamed one would be: it vouches for the run id and wait of this call, by this caller.
      const line = { method: request.method ?? 'POST', url: request.url ?? '/', authorization: request.headers.authorization };
      const extra = { [HELD_RUN_HEADER]: heldRunHeader(await holderKeys(projectId), { runId, coldStartMs }, line, null) };
      try {
        const outcome = await relayBufferedCall({ method: line.method, url: line.url, headers: request.headers, body: held.body }, response, replicaAddress(slot.replica), extra, sidecarAnswers);
        if (outcome.answered) {
          stats.relayed += 1;
          metrics?.handedOver(projectId, appName, mode, coldStartMs);
          return;
        }
        lastRefusal = outcome.refusal ?? lastRefusal;
      } finally {
        slot.release();
      }
      held.waits.stop = waiting.start(projectId, appName);
      held.entry.cancel = cancel;
      stats.retried += 1;
      logger.debug({ app: `${projectId}/${appName}`, runId, replica: slot.replica.name }, 'holder: a replica refused a held call before running it; trying again');
      await new Promise((resolve) => setTimeout(resolve, RELAY_RETRY_MS).unref());
    }
  }

  /** The call a record holds; null for a record altered at rest, which the dispatcher drops unread. */
  async function callOrNull(record: HeldRecord): Promise<HeldCall | null> {
    try {
      return await records.callOf(record);
    } catch (error) {
      if (error instanceof AlteredRecordError) return null;
      throw error;
    }
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
        // Accepted already (its caller has its 202): held past the bounds if need be, never refused now. A
        // record altered at rest has no body worth counting: the dispatcher drops it unread.
        const call = await callOrNull(mine);
        const bodyBytes = call?.body.length ?? 0;
        bounds.bodies(namespace).takeAnyway(bodyBytes);
        handOver(mine, call, bounds.takeAnyway(...appOf(mine)), bodyBytes);
      }
    }
    return claimed;
  }
  const sweeps = setInterval(() => {
    sweep().catch((error: unknown) => logger.warn({ err: error }, 'holder: sweeping the held async calls failed; trying again at the next sweep'));
  }, options.sweepIntervalMs ?? DEFAULT_SWEEP_INTERVAL_MS);
  sweeps.unref();

  const server: Server = createServer((request, response) => {
    if (request.url?.startsWith(HOLD_CONTROL_PREFIX)) {
      if (options.controlKey !== undefined) return answerHoldControl(request, response, { key: options.controlKey, index, identity: options.identity });
      response.writeHead(404).end();
      return;
    }
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
    held: (namespace, appName) => waiting.held(namespace, appName),
    heldReport: () => waiting.report(),
    get calls() {
      return bounds.calls;
    },
    get bodyBytes() {
      return bounds.bodyBytes;
    },
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
      slots.stop();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await replicas.stop();
      await Promise.all(handOvers);
    },
  };
}
