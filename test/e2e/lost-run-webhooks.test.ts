// Runs lost with a killed `runlet dev` notify their webhooks when it starts again: the failure (replica_lost),
// unsigned (the secret is never stored), to the whole endpoint the caller gave, query string included, which
// is kept in the SQLite file only until the delivery settles.
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { describe, expect, it } from 'vitest';
import type { RunRecord } from '../../crds/run-record-schema.ts';
import { RUNS_DB_FILE_NAME } from '../../sidecar/runs/sqlite-run-store.ts';
import { WEBHOOK_SIGNATURE_HEADER, WEBHOOK_TIMESTAMP_HEADER } from '../../sidecar/webhook/sign.ts';
import { FIXTURE_APPS, postJson } from '../support/dev-server.ts';
import { devProcessesPerTest, type DevProcess } from '../support/dev-process.ts';
import { waitFor } from '../support/wait.ts';
import { WebhookReceiver } from '../support/webhook-receiver.ts';

const APP = `${FIXTURE_APPS}/e2e`;
const devs = devProcessesPerTest([APP]);

async function killed(dev: DevProcess): Promise<void> {
  dev.child.kill('SIGKILL');
  await dev.exited;
}

async function runOf(url: string, runId: string): Promise<RunRecord | null> {
  const response = await fetch(`${url}/v2/projects/dev/apps/e2e/runs/${runId}`);
  return response.status === 200 ? ((await response.json()) as { item: RunRecord }).item : null;
}

const DESTINATION = '/hooks/in?token=s3cr3t';

/** Starts a run of `sleep` asking for a signed webhook; resolves with its id once it is running. */
async function runningRun(url: string, receiver: WebhookReceiver, options: { async: boolean; seconds: number }): Promise<string> {
  const endpoint = encodeURIComponent(receiver.at(DESTINATION).href);
  const call = postJson(`${url}/v4/dev/e2e/sleep?async=${options.async}&webhookEndpoint=${endpoint}`, { seconds: options.seconds }, {
    'x-webhook-secret': 'the-secret',
  });
  if (options.async) return (await call).headers.get('x-request-id')!;
  // A sync call waits for an answer the killed process never gives.
  call.catch(() => undefined);
  const listed = await waitFor(async () => {
    const response = await fetch(`${url}/v2/projects/dev/apps/e2e/runs?status=running`);
    return ((await response.json()) as { items: RunRecord[] }).items[0];
  }, { what: 'the sync run to be listed running' });
  return listed.id;
}

/** What the SQLite file holds beside the run's record: the destination column. */
function storedDestination(dataDir: string, runId: string): unknown {
  const db = new DatabaseSync(join(dataDir, RUNS_DB_FILE_NAME), { readOnly: true });
  try {
    return db.prepare('SELECT webhook_destination FROM runs WHERE id = ?').get(runId)?.webhook_destination;
  } finally {
    db.close();
  }
}

describe('runs lost with a killed runlet dev', () => {
  // Three runlet dev processes, one after the other: on a loaded 2-core machine, more than the default bound.
  it.each([true, false])('delivers the failure of a run in flight (async: %s), unsigned, once, after the restart', async (isAsync) => {
    const dataDir = await mkdtemp(join(tmpdir(), 'runlet-lost-webhook-'));
    const receiver = await WebhookReceiver.start();
    devs.defer(() => receiver.close());
    const dev = await devs.start(dataDir);
    const runId = await runningRun(dev.url, receiver, { async: isAsync, seconds: 30 });
    await waitFor(async () => (await runOf(dev.url, runId))?.status === 'running', { what: 'the run to start' });
    expect(storedDestination(dataDir, runId)).toBe(receiver.at(DESTINATION).href);
    await killed(dev);
    expect(receiver.deliveries).toHaveLength(0);

    const again = await devs.start(dataDir);
    await receiver.received(1);
    const delivery = receiver.deliveries[0]!;
    expect(delivery.path).toBe(DESTINATION);
    expect(delivery.headers[WEBHOOK_SIGNATURE_HEADER]).toBeUndefined();
    expect(delivery.headers[WEBHOOK_TIMESTAMP_HEADER]).toBeUndefined();
    expect(JSON.parse(delivery.body)).toMatchObject({
      run_id: runId,
      status: 'failure',
      status_code: 500,
      error: { type: 'ReplicaLost', message: expect.stringContaining('runlet dev stopped') },
    });
    const record = await waitFor(async () => {
      const run = await runOf(again.url, runId);
      return run?.webhook?.state === 'delivered' ? run : null;
    }, { what: 'the run to show its webhook delivered' });
    expect(record).toMatchObject({ status: 'failure', reason: 'replica_lost', webhook: { endpoint: receiver.at('/hooks/in').href, lastStatusCode: 200 } });
    expect(record.webhook!.attempts).toBeGreaterThanOrEqual(1);
    // Settled: the file no longer holds the query string.
    expect(storedDestination(dataDir, runId)).toBeNull();

    await killed(again);
    const third = await devs.start(dataDir);
    expect(await runOf(third.url, runId)).toMatchObject({ webhook: { state: 'delivered' } });
    expect(receiver.deliveries).toHaveLength(1);
  }, 120_000);

  it('does not deliver again a webhook delivered before the kill', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'runlet-lost-webhook-'));
    const receiver = await WebhookReceiver.start();
    devs.defer(() => receiver.close());
    const dev = await devs.start(dataDir);
    const runId = await runningRun(dev.url, receiver, { async: true, seconds: 0 });
    await waitFor(async () => (await runOf(dev.url, runId))?.webhook?.state === 'delivered', { what: 'the webhook to be delivered' });
    await killed(dev);

    const again = await devs.start(dataDir);
    expect(await runOf(again.url, runId)).toMatchObject({ status: 'success', webhook: { state: 'delivered', attempts: 1 } });
    expect(receiver.deliveries).toHaveLength(1);
    expect(receiver.deliveries[0]!.headers[WEBHOOK_SIGNATURE_HEADER]).toBeDefined();
  });

  it('records a delivery the kill interrupted as failed, without the destination, when the run had finished', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'runlet-lost-webhook-'));
    const receiver = await WebhookReceiver.start(['hang']);
    devs.defer(() => receiver.close());
    const dev = await devs.start(dataDir);
    const runId = await runningRun(dev.url, receiver, { async: true, seconds: 0 });
    await receiver.received(1);
    // Read through the store, which commits the run's success first.
    expect(await runOf(dev.url, runId)).toMatchObject({ status: 'success', webhook: { state: 'pending' } });
    await killed(dev);

    const again = await devs.start(dataDir);
    expect(await runOf(again.url, runId)).toMatchObject({
      status: 'success',
      webhook: { state: 'failed', lastError: 'not delivered: runlet dev stopped while delivering it' },
    });
    expect(storedDestination(dataDir, runId)).toBeNull();
    expect(receiver.deliveries).toHaveLength(1);
  });
});
