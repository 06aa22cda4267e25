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
  { key: 'webhook.deliveriesPerS', scenario: SCENARIO, label: `signed deliveries/s, ${RUNS} async runs at 32 connections, end to end`, unit: 'deliveries/s', decimals: 0, target: { op: '>=', value: 1000 } },
  { key: 'webhook.lost', scenario: SCENARIO, label: 'accepted runs not delivered', unit: '', decimals: 0, target: { op: '<=', value: 0 } },
  { key: 'webhook.badSignatures', scenario: SCENARIO, label: 'deliveries whose signature did not verify', unit: '', decimals: 0, target: { op: '<=', value: 0 } },
  { key: 'webhook.refused', scenario: SCENARIO, label: 'run calls not accepted', unit: '', decimals: 0, target: { op: '<=', value: 0 } },
];

interface ReceiverStats {
  delivered: number;
  duplicates: number;
  badSignatures: number;
  failures: number;
  firstAtMs: number | null;
  lastAtMs: number | null;
}

export async function measureWebhook(stack: Stack): Promise<RoundFigures> {
  const receiver = stack.receiver.url;
  await fetch(`${receiver}/reset`, { method: 'POST' }).then((response) => response.arrayBuffer());
  const query = `async=true&webhookEndpoint=${encodeURIComponent(`${receiver}/hook`)}`;
  const startedAtMs = Date.now();
  const load = await runAutocannon({
    url: runUrl(stack.asyncSidecar, 'run', query),
    connections: 32,
    amount: RUNS,
    body: BODY,
    headers: { 'x-webhook-secret': WEBHOOK_SECRET },
  });
  const stats = await waitForDeliveries(receiver, load.ok);
  await waitUntilIdle(stack.asyncSidecar.adminUrl);
  const seconds = ((stats.lastAtMs ?? Date.now()) - startedAtMs) / 1000;
  return {
    'webhook.deliveriesPerS': stats.delivered / seconds,
    'webhook.lost': load.ok - stats.delivered,
    'webhook.badSignatures': stats.badSignatures + stats.failures,
    'webhook.refused': RUNS - load.ok,
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
