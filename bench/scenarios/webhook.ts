// Webhook delivery: a burst of async runs, each with a signed webhook to a local receiver that verifies every
// signature. The rate is end to end: runs delivered ÷ time from the first call to the last delivery.
// autocannon, for a fixed number of calls.
import { runAutocannon } from '../load/autocannon.ts';
import type { FigureSpec, RoundFigures } from '../report.ts';
import { runUrl, WEBHOOK_SECRET, type Stack } from '../stack.ts';
import { waitUntilIdle } from './idle.ts';
import { BODY } from './sync.ts';

const SCENARIO = 'webhook delivery';
const RUNS = 3000;
const DELIVERY_TIMEOUT_MS = 60_000;

export const WEBHOOK_FIGURES: FigureSpec[] = [
  {
    key: 'webhook.deliveriesPerS',
    scenario: SCENARIO,
    label: `signed deliveries/s, ${RUNS} async runs at 32 connections, end to end, SQLite sidecar (its accepts keep ahead of its deliveries)`,
    unit: 'deliveries/s',
    decimals: 0,
    target: { op: '>=', value: 1000 },
  },
  { key: 'webhook.podDeliveriesPerS', scenario: SCENARIO, label: `the same from the pod's sidecar (\`--run-store runlog\`)`, unit: 'deliveries/s', decimals: 0 },
  { key: 'webhook.lost', scenario: SCENARIO, label: 'accepted runs not delivered (both sidecars)', unit: '', decimals: 0, target: { op: '<=', value: 0 } },
  { key: 'webhook.badSignatures', scenario: SCENARIO, label: 'deliveries whose signature did not verify (both sidecars)', unit: '', decimals: 0, target: { op: '<=', value: 0 } },
  { key: 'webhook.refused', scenario: SCENARIO, label: 'run calls not accepted (both sidecars)', unit: '', decimals: 0, target: { op: '<=', value: 0 } },
];

interface ReceiverStats {
  delivered: number;
  duplicates: number;
  badSignatures: number;
  failures: number;
  firstAtMs: number | null;
  lastAtMs: number | null;
}

/**
 * The same burst through both sidecars, one after the other: the SQLite one, whose accepts keep ahead of its
 * deliveries, measures the deliverer; the pod's is shown beside it.
 */
export async function measureWebhook(stack: Stack): Promise<RoundFigures> {
  const direct = await deliverBurst(stack, stack.sqliteSidecar);
  const pod = await deliverBurst(stack, stack.asyncSidecar);
  return {
    'webhook.deliveriesPerS': direct.deliveriesPerS,
    'webhook.podDeliveriesPerS': pod.deliveriesPerS,
    'webhook.lost': direct.lost + pod.lost,
    'webhook.badSignatures': direct.badSignatures + pod.badSignatures,
    'webhook.refused': direct.refused + pod.refused,
  };
}

async function deliverBurst(stack: Stack, sidecar: Stack['asyncSidecar']) {
  const receiver = stack.receiver.url;
  await fetch(`${receiver}/reset`, { method: 'POST' }).then((response) => response.arrayBuffer());
  const query = `async=true&webhookEndpoint=${encodeURIComponent(`${receiver}/hook`)}`;
  const startedAtMs = Date.now();
  const load = await runAutocannon({
    url: runUrl(sidecar, 'run', query),
    connections: 32,
    amount: RUNS,
    body: BODY,
    headers: { 'x-webhook-secret': WEBHOOK_SECRET },
  });
  const stats = await waitForDeliveries(receiver, load.ok);
  await waitUntilIdle(sidecar.adminUrl);
  const seconds = ((stats.lastAtMs ?? Date.now()) - startedAtMs) / 1000;
  return {
    deliveriesPerS: stats.delivered / seconds,
    lost: load.ok - stats.delivered,
    badSignatures: stats.badSignatures + stats.failures,
    refused: RUNS - load.ok,
  };
}

/** The receiver's counts once it has every accepted run, or when the bound passes. */
async function waitForDeliveries(receiver: string, expected: number): Promise<ReceiverStats> {
  const deadline = performance.now() + DELIVERY_TIMEOUT_MS;
  for (;;) {
    const stats = (await (await fetch(`${receiver}/stats`)).json()) as ReceiverStats;
    if (stats.delivered >= expected || performance.now() > deadline) return stats;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
