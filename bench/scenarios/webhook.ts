// Webhook delivery: a burst of async runs, each with a signed webhook to a local receiver that verifies every
// signature. The rate is end to end: runs delivered ÷ time from the first call to the last delivery.
// autocannon, for a fixed number of calls. The target is read on the pod's sidecar (`--run-store runlog`, its
// 202 after an append to the RunLog journal in its data dir); the SQLite sidecar (as outside a cluster) takes
// the same burst, in turn, for comparison. Both must deliver every accepted run with a valid signature.
import { runAutocannon } from '../load/autocannon.ts';
import type { FigureSpec, RoundFigures } from '../report.ts';
import { runUrl, WEBHOOK_SECRET, type Stack } from '../stack.ts';
import { waitUntilIdle } from './idle.ts';
import { inTurn, type Settings } from './settings.ts';
import { BODY } from './sync.ts';

const SCENARIO = 'webhook delivery';
const RUNS = 3000;
const DELIVERY_TIMEOUT_MS = 60_000;

export const WEBHOOK_FIGURES: FigureSpec[] = [
  {
    key: 'webhook.deliveriesPerS',
    scenario: SCENARIO,
    label: `signed deliveries/s, ${RUNS} async runs at 32 connections, end to end, pod's sidecar (\`--run-store runlog\`: 202 after a journal append)`,
    unit: 'deliveries/s',
    decimals: 0,
    target: { op: '>=', value: 1000 },
  },
  { key: 'webhook.sqliteDeliveriesPerS', scenario: SCENARIO, label: 'the same from the SQLite sidecar (`--run-store sqlite`, as outside a cluster)', unit: 'deliveries/s', decimals: 0 },
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
 * The same burst through both sidecars, one after the other, in an order that turns with the round: the pod's
 * (the async one, which admits webhooks to the loopback receiver), which the target is about, and the SQLite one.
 */
export async function measureWebhook(stack: Stack, _settings: Settings, round: number): Promise<RoundFigures> {
  const sidecars = { pod: stack.asyncSidecar, sqlite: stack.sqliteSidecar };
  const bursts: Partial<Record<keyof typeof sidecars, Burst>> = {};
  for (const name of inTurn(['pod', 'sqlite'] as const, round)) bursts[name] = await deliverBurst(stack, sidecars[name]);
  const { pod, sqlite } = bursts as Required<typeof bursts>;
  return {
    'webhook.deliveriesPerS': pod.deliveriesPerS,
    'webhook.sqliteDeliveriesPerS': sqlite.deliveriesPerS,
    'webhook.lost': pod.lost + sqlite.lost,
    'webhook.badSignatures': pod.badSignatures + sqlite.badSignatures,
    'webhook.refused': pod.refused + sqlite.refused,
  };
}

interface Burst {
  deliveriesPerS: number;
  lost: number;
  badSignatures: number;
  refused: number;
}

async function deliverBurst(stack: Stack, sidecar: Stack['asyncSidecar']): Promise<Burst> {
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
