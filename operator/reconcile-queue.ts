// The queue of Apps to reconcile: keys are `namespace/name`; each handling is timed and counted, and a failure
// is logged and retried with the work queue's backoff.
import type { Logger } from 'pino';
import type { OperatorMetrics } from './metrics.ts';
import type { ReconcileResult } from './reconcile.ts';
import { WorkQueue } from '../kube/work-queue.ts';

export interface ReconcileQueueOptions {
  workers: number;
  reconcile(namespace: string, name: string): Promise<ReconcileResult>;
  metrics: OperatorMetrics;
  logger: Logger;
}

export function createReconcileQueue(options: ReconcileQueueOptions): WorkQueue {
  const { metrics, logger } = options;
  return new WorkQueue({
    workers: options.workers,
    handle: async (key) => {
      const [namespace, name] = splitKey(key);
      const stopTimer = metrics.reconcileDuration.startTimer();
      try {
        const outcome = await options.reconcile(namespace, name);
        metrics.reconciles.inc({ outcome });
        logger.debug({ app: key, outcome }, 'reconciled');
      } catch (error) {
        metrics.reconciles.inc({ outcome: 'error' });
        metrics.reconcileErrors.inc();
        throw error;
      } finally {
        stopTimer();
      }
    },
    onDepthChange: (depth) => metrics.queueDepth.set(depth),
    onFailure: (key, error, failures, retryInMs) => logger.warn({ app: key, err: error, failures, retryInMs }, 'reconcile failed; retrying'),
  });
}

function splitKey(key: string): [string, string] {
  const slash = key.indexOf('/');
  return [key.slice(0, slash), key.slice(slash + 1)];
}
