// The collector's callers for tests that are about shipping, not identity: a token
// `results-token.<namespace>.<app>.<pod>` stands for that pod of that App (by default the pod `test-host`, the
// replica test records carry, in namespace `demo`). Who a token is in a cluster, the TokenReview of a pod's
// projected token, is operator/results-callers.ts's, tested with the API server in operator/results-collector.test.ts.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CallerRefusal, CollectorCaller } from '../../results/collector.ts';

const PREFIX = 'results-token';

export function resultsTokenOf(appName: string, podName = 'test-host', namespace = 'demo'): string {
  return [PREFIX, namespace, appName, podName].join('.');
}

export async function identifyTestToken(token: string): Promise<CollectorCaller | CallerRefusal> {
  const [prefix, namespace, appName, podName, ...rest] = token.split('.');
  if (prefix !== PREFIX || !namespace || !appName || !podName || rest.length > 0) return { status: 401, detail: 'not a test results token' };
  return { namespace, appName, podName };
}

/** A token file in `dir` as the kubelet projects one, holding that pod's token; its path. */
export function writeResultsToken(dir: string, appName: string, podName?: string, namespace?: string): string {
  const path = join(dir, 'results-token');
  writeFileSync(path, `${resultsTokenOf(appName, podName, namespace)}\n`);
  return path;
}
