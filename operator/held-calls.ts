// The calls the holders hold for an App at zero, as the management API sees them: listed `pending` beside the
// runs the replicas recorded, found by id, and a sync or stream one cancelled where it waits. The holders
// keep them in memory (activator/hold-control.ts); each is asked over its holder port, at the addresses of the
// holder Service's Endpoints, with a request signed by the holder control key. Only for Apps that scale to
// zero: no other App's calls are ever held.
import type { Logger } from 'pino';
import { ProblemError } from '../crds/problem.ts';
import { Problems } from '../crds/problems.ts';
import type { App } from '../crds/app-schema.ts';
import type { RunRecord } from '../crds/run-record-schema.ts';
import type { ListRunsQuery, RunPage, RunSource } from '../management/run-source.ts';
import { HOLD_CONTROL_HEADER, holdControlPath, signHoldControl, type HeldCancelAnswer } from '../activator/hold-control.ts';
import { scalesToZero } from './autoscaling/endpoints.ts';
import type { HolderAddress } from './autoscaling/endpoints.ts';
import type { ReplicaAddress } from './replica-address.ts';

/** A holder answers from memory; as for a replica's cancel (run-cancel.ts), longer means it cannot answer. */
const ASK_TIMEOUT_MS = 5_000;
const RETRY_AFTER_SECONDS = '2';

export interface HeldCallsOptions {
  /** The holder Service's addresses now (its Endpoints watch). */
  holders(): HolderAddress[];
  controlKey(): Promise<Uint8Array>;
  apps: { get(namespace: string, name: string): App | undefined };
  /** Where a holder address is dialled. Default: as listed (the test kubelets remap). */
  address?: (holder: HolderAddress) => ReplicaAddress;
  logger: Logger;
}

export class HeldCalls {
  readonly #options: HeldCallsOptions;

  constructor(options: HeldCallsOptions) {
    this.#options = options;
  }

  /** The calls held for the App now, pending; a holder that cannot be asked is logged and left out. */
  async list(namespace: string, appName: string): Promise<RunRecord[]> {
    const answers = await this.#askAll('GET', namespace, appName, holdControlPath(namespace, appName));
    return answers.flatMap((answer) => (answer?.status === 200 ? (answer.body as { runs: RunRecord[] }).runs : []));
  }

  /**
   * Cancels a sync or stream call a holder holds: what it was (to record it cancelled), or null when none holds
   * it. A holder that could not be asked may hold it: 503 replica-unreachable, never "not here" by guess.
   */
  async cancel(namespace: string, appName: string, runId: string): Promise<HeldCancelAnswer['call'] | null> {
    const answers = await this.#askAll('POST', namespace, appName, holdControlPath(namespace, appName, runId));
    const stopped = answers.find((answer) => answer !== null && answer.status === 202);
    if (stopped !== undefined) return (stopped!.body as HeldCancelAnswer).call;
    if (answers.includes(null)) {
      throw new ProblemError(Problems.replicaUnreachable, `run ${runId} may be waiting at a holder that could not be asked to cancel it (the operator log says why); retry shortly`, {
        headers: { 'retry-after': RETRY_AFTER_SECONDS },
      });
    }
    return null;
  }

  /**
   * Tells the holders an async call's record was deleted by a cancel, so that none lists it pending any more
   * (its hand-over drops it when it finds the record gone). Best effort: a holder that cannot be told lists it
   * until then.
   */
  async forget(namespace: string, appName: string, runId: string): Promise<void> {
    await this.#askAll('POST', namespace, appName, holdControlPath(namespace, appName, runId, 'forget'));
  }

  /** Each holder's answer; null for one that could not be asked (logged). */
  async #askAll(method: string, namespace: string, appName: string, path: string): Promise<({ status: number; body: unknown } | null)[]> {
    const app = this.#options.apps.get(namespace, appName);
    const holders = this.#options.holders();
    if (app === undefined || !scalesToZero(app) || holders.length === 0) return [];
    const key = await this.#options.controlKey();
    return Promise.all(holders.map((holder) => this.#ask(holder, method, path, key)));
  }

  async #ask(holder: HolderAddress, method: string, path: string, key: Uint8Array): Promise<{ status: number; body: unknown } | null> {
    try {
      const { host, port } = this.#options.address?.(holder) ?? { host: holder.ip, port: holder.port };
      const answer = await fetch(`http://${host.includes(':') ? `[${host}]` : host}:${port}${path}`, {
        method,
        headers: { [HOLD_CONTROL_HEADER]: signHoldControl(key, method, path, Date.now()) },
        signal: AbortSignal.timeout(ASK_TIMEOUT_MS),
      });
      const text = await answer.text();
      if (answer.status !== 200 && answer.status !== 202 && answer.status !== 204 && answer.status !== 404) {
        this.#options.logger.warn({ holder: `${holder.ip}:${holder.port}`, status: answer.status, answer: text.slice(0, 200) }, `a holder refused ${method === 'GET' ? 'to list the calls it holds: they are not listed' : `${path.slice(path.lastIndexOf('/') + 1)} of a held call`}`);
        return null;
      }
      return { status: answer.status, body: answer.status === 404 || answer.status === 204 ? null : JSON.parse(text) };
    } catch (error) {
      this.#options.logger.warn({ holder: `${holder.ip}:${holder.port}`, err: error }, `a holder could not be asked ${method === 'GET' ? 'which calls it holds: they are not listed' : `to ${path.slice(path.lastIndexOf('/') + 1)} a held call`}`);
      return null;
    }
  }
}

function matches(run: RunRecord, query: ListRunsQuery): boolean {
  return (
    (query.status === null || query.status === run.status) &&
    (!query.asyncOnly || run.async) &&
    (query.functionName === null || query.functionName === run.functionName) &&
    (query.beforeId === null || run.id < query.beforeId) &&
    (query.createdAfter === null || run.createdAt >= query.createdAfter) &&
    (query.createdBefore === null || run.createdAt < query.createdBefore)
  );
}

/**
 * `source`'s runs with the calls the holders hold: each listed where its id sorts (UUID v7: its arrival), as
 * long as no replica has recorded it (the replica's record wins: it is the later state).
 */
export function withHeldRuns(source: RunSource, held: Pick<HeldCalls, 'list'>): RunSource {
  return {
    async listRuns(query: ListRunsQuery): Promise<RunPage> {
      const [page, waiting] = await Promise.all([source.listRuns(query), held.list(query.projectId, query.appName)]);
      const recorded = new Set(page.items.map((run) => run.id));
      const extra = waiting.filter((run) => !recorded.has(run.id) && matches(run, query));
      if (extra.length === 0) return page;
      const merged = [...page.items, ...extra].sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
      return { items: merged.slice(0, query.pageSize), hasMore: page.hasMore || merged.length > query.pageSize };
    },
    async getRun(projectId: string, appName: string, runId: string): Promise<RunRecord | undefined> {
      const recorded = await source.getRun(projectId, appName, runId);
      if (recorded !== undefined) return recorded;
      return (await held.list(projectId, appName)).find((run) => run.id === runId);
    },
  };
}
