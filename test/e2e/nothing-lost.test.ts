// Nothing lost: 2,000 async runs with webhooks, the receiver refusing the first attempt of every third run
// with 404. Every run is recorded success, every run id is delivered at least once, also after a restart.
// The senders take turns at the front doors: half call `runlet dev`, half the sidecar run server in front of
// the same replica, so both are proven under the same load without running the 2,000 runs twice.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makePythonApp } from '../support/app-dir.ts';
import { startTestDevServer, type TestDevServer } from '../support/dev-server.ts';
import { FRONT_DOORS, openFrontDoor, type OpenFrontDoor } from '../support/run-server.ts';
import { waitFor } from '../support/wait.ts';
import { WebhookReceiver } from '../support/webhook-receiver.ts';
import { SqliteRunStore } from '../../sidecar/runs/sqlite-run-store.ts';
import pino from 'pino';
import type { RunRecord } from '../../crds/run-record-schema.ts';

const RUNS = 2000;
const SENDERS = 32;
let dev: TestDevServer;
let doors: OpenFrontDoor[] = [];
let receiver: WebhookReceiver;

beforeAll(async () => {
  receiver = await WebhookReceiver.start();
  dev = await startTestDevServer({
    appDirs: [await makePythonApp('bulk', '[scaling]\nreplica_concurrency = 8\nresponse_grace_period = 120')],
    webhooks: { schedule: { delaysMs: [300, 300], maxJitterMs: 100 } },
  });
  doors = await Promise.all(FRONT_DOORS.map((door) => openFrontDoor(door, dev)));
});
afterAll(async () => {
  for (const door of doors.splice(0)) await door.close();
  await dev?.dispose();
  await receiver?.close();
});

describe('nothing lost', () => {
  it(`records and delivers ${RUNS} async runs with webhooks through retries and a restart`, async () => {
    const attemptsByRun = new Map<string, number>();
    const acknowledgedByRun = new Map<string, number>();
    const order = new Map<string, number>();
    receiver.answer = (delivery) => {
      const runId = String(delivery.headers['x-request-id']);
      const attempt = (attemptsByRun.get(runId) ?? 0) + 1;
      attemptsByRun.set(runId, attempt);
      if (attempt === 1 && (order.get(runId) ?? 0) % 3 === 0) return 404;
      acknowledgedByRun.set(runId, (acknowledgedByRun.get(runId) ?? 0) + 1);
      return 200;
    };

    const endpoint = encodeURIComponent(`${receiver.url}/bulk`);
    const accepted: string[] = [];
    let refusals = 0;
    let next = 0;
    async function sender(origin: string): Promise<void> {
      while (next < RUNS) {
        const index = next++;
        for (;;) {
          const response = await fetch(`${origin}/v4/dev/bulk/echo?async=true&webhookEndpoint=${endpoint}`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ index }),
          });
          if (response.status === 503) {
            // The queue is full: a well-behaved client waits as Retry-After says and tries again.
            refusals++;
            await response.body?.cancel();
            await new Promise((resolve) => setTimeout(resolve, Number(response.headers.get('retry-after')) * 100));
            continue;
          }
          expect(response.status).toBe(202);
          const { run_id: runId } = (await response.json()) as { run_id: string };
          order.set(runId, index);
          accepted.push(runId);
          break;
        }
      }
    }
    await Promise.all(Array.from({ length: SENDERS }, (_, index) => sender(doors[index % doors.length]!.origin)));
    expect(new Set(accepted).size).toBe(RUNS);

    await waitFor(() => accepted.every((id) => attemptsByRun.has(id)), { timeoutMs: 120_000, what: 'a delivery for every run' });
    await waitFor(() => dev.replica.deliverer.pendingCount === 0, { timeoutMs: 60_000, what: 'retries to finish' });
    const retried = [...attemptsByRun.values()].filter((attempts) => attempts > 1).length;
    // A duplicate is a run the receiver acknowledged more than once: the case receivers must be idempotent for.
    const duplicates = [...acknowledgedByRun.values()].filter((count) => count > 1).length;
    console.info(
      `nothing-lost: ${RUNS} runs, ${receiver.deliveries.length} requests, ${retried} runs retried after a 404, ` +
        `${duplicates} duplicate acknowledged deliveries, ${refusals} 503 refusals while the queue was full`,
    );
    expect(retried).toBe(Math.ceil(RUNS / 3));
    expect(accepted.every((id) => (acknowledgedByRun.get(id) ?? 0) >= 1)).toBe(true);

    for (const door of doors.splice(0)) await door.close();
    await dev.close();
    const store = new SqliteRunStore({ dataDir: dev.dataDir, logger: pino({ level: 'silent' }) });
    try {
      const records: RunRecord[] = [];
      let beforeId: string | null = null;
      for (;;) {
        const page = await store.listRuns({ projectId: 'dev', appName: 'bulk', pageSize: 500, beforeId, asyncOnly: true, status: null, functionName: null, createdAfter: null, createdBefore: null });
        records.push(...page.items);
        if (!page.hasMore) break;
        beforeId = page.items.at(-1)!.id;
      }
      expect(records).toHaveLength(RUNS);
      expect(new Set(records.map((r) => r.id))).toEqual(new Set(accepted));
      expect(records.filter((r) => r.status !== 'success')).toEqual([]);
      expect(records.filter((r) => r.webhook?.state !== 'delivered')).toEqual([]);
    } finally {
      await store.close();
    }
  }, 240_000);
});
