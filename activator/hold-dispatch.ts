// Handing a held async call to a replica: wake the app, wait for a ready replica, post the call with its run id
// and wait (the held-run header, signed with the App namespace's key over the call and its body, vouching for
// the caller the holder authenticated when it took the call: its token is kept nowhere), and drop the durable record once the replica has accepted it (202: from then on the replica's run
// record and webhook carry it, as for any async call — a call it refuses, too, is recorded as a failed run and
// answered 202: sidecar/modes/held-refusal.ts — or 409: an earlier attempt was accepted, its answer lost).
// A refusal of the caller (401, 403: a call the holder authenticated nobody for, to an App whose auth was
// turned on while it was held) is final and recorded by no replica: it is ours to report, in the log and the
// holder's calls counted `caller_refused`, and the call is dropped. So is a record altered at rest (`altered`)
// and one past its expiry (`expired`, by the holder's sweep).
// Until then the record stays: a replica that refuses for now (503: draining, at capacity) or cannot be reached
// is tried again, and any other answer a few times (MAX_UNRECORDED_ANSWERS).
import type { Logger } from 'pino';
import type { App } from '../crds/app-schema.ts';
import { Problems } from '../crds/problems.ts';
import { HELD_RUN_HEADER, heldRunHeader, verifiedHeldRunHeader } from '../run-request/auth/held-run.ts';
import type { HeldReplica, ReadyReplicas } from './hold-replicas.ts';
import { postWholeCall, type ReplicaAddress } from './hold-proxy.ts';
import { AlteredRecordError, type HeldCall, type HeldRecord, type HeldRecords } from './hold-records.ts';

export interface DispatchDeps {
  apps: { get(namespace: string, name: string): App | undefined };
  /** Resolves once the App cache is filled: before, an App missing from it may well exist. */
  appsSynced(): Promise<void>;
  records: HeldRecords;
  replicas: ReadyReplicas;
  wake(namespace: string, appName: string): Promise<unknown>;
  replicaAddress(replica: HeldReplica): ReplicaAddress;
  coldStartTimeoutMs(app: App): number;
  /** Each App namespace's hand-over key (holder-key.ts `namespaceHolderKeys`). */
  holderKeys: (namespace: string) => Promise<Uint8Array>;
  logger: Logger;
  /** Pause before trying a replica again after it refused for now or could not be reached. */
  retryDelayMs: number;
  /** A call no replica recorded, logged and dropped: its caller refused, or MAX_UNRECORDED_ANSWERS answers (`status`: the last one's). */
  onDropped?(call: HeldCall, why: DroppedWhy, status: number): void;
  /** A record dropped unread: it is not what a holder wrote (hold-records.ts). */
  onAltered?(record: HeldRecord): void;
  onHandedOver?(call: HeldCall, coldStartMs: number): void;
}

/**
 * Why a held async call was dropped unrecorded: the replica refused its caller (401, 403), recorded none of its
 * attempts, it outlived its record's expiry (holder.ts's sweep), or its record was altered at rest.
 */
export type DroppedWhy = 'caller_refused' | 'unrecorded' | 'expired' | 'altered';

const POST_TIMEOUT_MS = 30_000;

/**
 * Answers other than 202 and 503 a held call gets before it is dropped. A replica with the holder key records
 * every refusal of the call itself as its failed run and answers 202, so such an answer means the replica
 * could not record it: a 5xx of its own (an internal error, its runtime failing to check the call), 408 (the
 * hand-over's body stalled), or a replica without the key (not yet restarted after a rotation, or a copy of
 * the key missing) refusing a bad call as an ordinary one. The first kinds pass within seconds; the last
 * repeats until a replica with the key serves. Keeping the record for ever would keep waking the app, and
 * the call would count as its load (the scaler never takes it to zero), for a call that may never pass;
 * dropping it at once would lose a call that a second attempt saves. So a few attempts, spaced as a 503's
 * retries, then dropped with an error log naming its run id (its caller's run is never listed).
 */
export const MAX_UNRECORDED_ANSWERS = 5;

export function createDispatcher(deps: DispatchDeps): { handOver(record: HeldRecord): Promise<void>; readonly stopped: boolean; stop(): void } {
  const { records, replicas, logger } = deps;
  let stopped = false;
  const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms).unref());

  async function handOver(initial: HeldRecord): Promise<void> {
    let record: HeldRecord | null = initial;
    let unrecorded = 0;
    let call: HeldCall;
    try {
      call = await records.callOf(initial);
    } catch (error) {
      if (!(error instanceof AlteredRecordError)) throw error;
      logger.error({ err: error, record: initial.metadata?.name }, 'holder: a held async call’s record was altered at rest; dropping it unread');
      deps.onAltered?.(initial);
      await records.remove(initial);
      return;
    }
    const what = { app: `${call.namespace}/${call.appName}`, runId: call.runId };
    await deps.appsSynced();
    while (record !== null && !stopped) {
      const app = deps.apps.get(call.namespace, call.appName);
      if (app === undefined) {
        logger.warn(what, 'holder: the app of a held async call is gone; dropping the call');
        await records.remove(record);
        return;
      }
      await deps.wake(call.namespace, call.appName);
      const replica = await replicas.waitForReadyReplica(call.namespace, call.appName, deps.coldStartTimeoutMs(app));
      if (stopped) return;
      if (replica === null) {
        logger.warn(what, 'holder: no replica ready within the cold-start limit; still holding the async call');
        record = await records.claim(record);
        continue;
      }
      // Claimed again right before the post: a call cancelled while its app woke (its record deleted:
      // hold-cancel.ts) is never handed over.
      record = await records.claim(record);
      if (record === null) return;
      const coldStartMs = Math.max(0, Date.now() - call.acceptedAt);
      try {
        const key = await deps.holderKeys(call.namespace);
        const run = { runId: call.runId, coldStartMs };
        const line = { method: call.method, url: call.url };
        // No token is kept: the holder vouches for the caller it authenticated, or for none (the replica then
        // authenticates the call as it comes, without one).
        const header = call.authenticatedProject !== null ? verifiedHeldRunHeader(key, run, line, call.body) : heldRunHeader(key, run, { ...line, authorization: undefined }, call.body);
        const answer = await postWholeCall(call, deps.replicaAddress(replica), { [HELD_RUN_HEADER]: header }, POST_TIMEOUT_MS);
        if (answer.status === 202 || answer.status === Problems.heldRunTaken.status) {
          await records.remove(record);
          deps.onHandedOver?.(call, coldStartMs);
          return;
        }
        if (answer.status === Problems.unauthorized.status || answer.status === Problems.forbidden.status) {
          const refused = { ...what, status: answer.status, answer: answer.body.slice(0, 500) };
          logger.warn(refused, "holder: the replica refused a held async call's caller (the App's auth was turned on while the call, taken without a token, was held); its run is not recorded, dropping it");
          deps.onDropped?.(call, 'caller_refused', answer.status);
          await records.remove(record);
          return;
        }
        if (answer.status !== 503) {
          unrecorded += 1;
          const answered = { ...what, status: answer.status, answer: answer.body.slice(0, 500), attempt: unrecorded };
          if (unrecorded >= MAX_UNRECORDED_ANSWERS) {
            logger.error(answered, 'holder: no replica recorded a held async call; dropping it');
            deps.onDropped?.(call, 'unrecorded', answer.status);
            await records.remove(record);
            return;
          }
          logger.error(answered, 'holder: the replica did not record a held async call; trying again');
        }
      } catch (error) {
        logger.warn({ ...what, err: error }, 'holder: could not hand a held async call to a replica; retrying');
      }
      await pause(deps.retryDelayMs);
      record = await records.claim(record);
    }
  }

  return {
    handOver: (record) =>
      handOver(record).catch((error: unknown) => logger.error({ err: error, record: record.metadata?.name }, 'holder: handing over a held async call failed; it stays recorded for the next recovery')),
    get stopped() {
      return stopped;
    },
    stop() {
      stopped = true;
    },
  };
}
