// A container of an App pod that ended and that the kubelet restarted (a runtime that crashed, a sidecar killed
// for its memory): the App's status says which, how it ended and how often (status.lastRestart), and a Warning
// Event `ContainerRestarted` tells it where `kubectl describe app` shows it. The pod watch (app-watches.ts)
// keeps each container's restart count and last end; a count that grew between two versions of a pod is a
// restart. A pod first seen (the operator's start, a watch relisted) reports nothing: its restarts are old news.
import { constants } from 'node:os';
import type { Logger } from 'pino';
import { APP_LABEL } from '../crds/api-group.ts';
import type { App, ContainerRestart } from '../crds/app-schema.ts';
import type { KubeApi } from '../kube/client.ts';
import { isNotFound } from '../kube/errors.ts';
import { metaTime, resourcePath } from '../kube/objects.ts';
import type { ContainerStatusView, PodObject } from './runlog-verdict.ts';

/** A container status as the API server sends it: the fields kept of it. */
interface ApiContainerStatus {
  name?: string;
  restartCount?: number;
  lastState?: { terminated?: { exitCode?: number; signal?: number; reason?: string; message?: string } };
}

/** What the pod watch keeps of `status.containerStatuses`. */
export function containerRestarts(statuses: unknown): ContainerStatusView[] | undefined {
  if (!Array.isArray(statuses)) return undefined;
  return (statuses as ApiContainerStatus[]).map((status) => {
    const terminated = status.lastState?.terminated;
    return {
      name: status.name ?? '',
      restartCount: status.restartCount ?? 0,
      ...(terminated === undefined
        ? {}
        : { lastTerminated: { exitCode: terminated.exitCode, signal: terminated.signal, reason: terminated.reason, message: terminated.message } }),
    };
  });
}

const SIGNAL_NAMES = new Map(Object.entries(constants.signals).map(([name, number]) => [number, name]));

/** How a container's last run ended, in words: `exit code 137 (killed by SIGKILL)`. */
function howItEnded(terminated: NonNullable<ContainerStatusView['lastTerminated']>): string {
  const { exitCode, reason, message } = terminated;
  const signal = terminated.signal ?? (exitCode !== undefined && exitCode > 128 ? exitCode - 128 : undefined);
  const parts = [
    exitCode === undefined ? 'an unknown exit' : `exit code ${exitCode}`,
    signal === undefined ? undefined : `killed by ${SIGNAL_NAMES.get(signal) ?? `signal ${signal}`}`,
    reason === undefined || reason === 'Error' ? undefined : reason,
  ].filter((part) => part !== undefined);
  const text = parts.length === 1 ? parts[0]! : `${parts[0]} (${parts.slice(1).join(', ')})`;
  return message === undefined || message === '' ? text : `${text}: ${message.trim()}`;
}

/** The restart `pod` shows over `previous` (the container whose count grew most recently), if any. Pure. */
export function restartOf(pod: PodObject, previous: PodObject | undefined, now: Date): ContainerRestart | undefined {
  if (previous === undefined) return undefined;
  const before = new Map((previous.status?.containerStatuses ?? []).map((status) => [status.name, status.restartCount]));
  const restarted = (pod.status?.containerStatuses ?? []).find((status) => status.restartCount > (before.get(status.name) ?? status.restartCount));
  if (restarted === undefined) return undefined;
  const terminated = restarted.lastTerminated ?? {};
  const podName = pod.metadata?.name ?? '';
  return {
    time: metaTime(now),
    pod: podName,
    container: restarted.name,
    restartCount: restarted.restartCount,
    ...(terminated.exitCode === undefined ? {} : { exitCode: terminated.exitCode }),
    reason: terminated.reason ?? 'Unknown',
    message: `container ${restarted.name} of pod ${podName} ended with ${howItEnded(terminated)} and was restarted by the kubelet (restart ${restarted.restartCount} of this pod's ${restarted.name})`,
  };
}

export interface ContainerRestartsOptions {
  /** Writes only while this replica leads (LeaderOnlyApi); reads are not needed. */
  api: KubeApi;
  /** The App a pod belongs to, from the operator's cache. */
  app(namespace: string, name: string): App | undefined;
  isLeader(): boolean;
  events: { record(app: App, note: { type: 'Normal' | 'Warning'; reason: string; message: string }): void };
  logger: Logger;
  now?: () => Date;
}

export class ContainerRestarts {
  readonly #options: ContainerRestartsOptions;

  constructor(options: ContainerRestartsOptions) {
    this.#options = options;
  }

  /** A pod of an App changed (not deleted). */
  podChanged(pod: PodObject, previous: PodObject | undefined): void {
    const { isLeader, logger } = this.#options;
    if (!isLeader()) return;
    const namespace = pod.metadata?.namespace;
    const appName = pod.metadata?.labels?.[APP_LABEL];
    if (namespace === undefined || appName === undefined) return;
    const app = this.#options.app(namespace, appName);
    const restart = restartOf(pod, previous, (this.#options.now ?? (() => new Date()))());
    if (app === undefined || restart === undefined) return;
    logger.warn({ app: `${namespace}/${appName}`, pod: restart.pod, container: restart.container, restartCount: restart.restartCount }, restart.message);
    this.#options.events.record(app, { type: 'Warning', reason: 'ContainerRestarted', message: restart.message });
    const path = resourcePath({ apiVersion: app.apiVersion, kind: app.kind, namespace, name: appName }, 'status');
    // Merge-patched: the reconcile's conditions, the counters and the autoscaler's fields stay.
    this.#options.api.mergePatch(path, { status: { lastRestart: restart } }).catch((error: unknown) => {
      if (!isNotFound(error)) logger.warn({ err: error, app: `${namespace}/${appName}` }, 'could not write the App status lastRestart');
    });
  }
}
