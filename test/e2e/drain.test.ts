// Graceful drain of `runlet dev` (the same Replica drain as a pod's sidecar): on SIGTERM, accepted runs and
// their webhooks finish, new runs are refused, records survive; and a crash right after a 202 loses nothing.
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURE_APPS, postJson } from '../support/dev-server.ts';
import { devProcessesPerTest } from '../support/dev-process.ts';
import { EventReader } from '../support/sse.ts';
import { waitFor } from '../support/wait.ts';
import { WebhookReceiver } from '../support/webhook-receiver.ts';
import type { RunRecord } from '../../crds/run-record-schema.ts';

const APP = `${FIXTURE_APPS}/e2e`;
const devs = devProcessesPerTest([APP]);

async function runOf(url: string, runId: string): Promise<RunRecord | null> {
  const response = await fetch(`${url}/v2/projects/dev/apps/e2e/runs/${runId}`);
  return response.status === 200 ? ((await response.json()) as { item: RunRecord }).item : null;
}

describe('drain', () => {
  // A dev process, a stream, an async run with its webhook, and the drain: slow on a loaded 2-core machine.
  it('on SIGTERM finishes an async run with its webhook and a stream in flight, refuses new runs, exits 0', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'runlet-drain-'));
    const receiver = await WebhookReceiver.start();
    devs.defer(() => receiver.close());
    const dev = await devs.start(dataDir);

    const accepted = await postJson(`${dev.url}/v4/dev/e2e/sleep?async=true&webhookEndpoint=${encodeURIComponent(receiver.url)}`, { seconds: 3 });
    const asyncId = ((await accepted.json()) as { run_id: string }).run_id;
    const stream = await postJson(`${dev.url}/v4/dev/e2e/slow_items`, { n: 6, pause: 0.4 }, { accept: 'text/event-stream' });
    const streamId = stream.headers.get('x-request-id')!;
    const reader = new EventReader(stream.body!);
    expect((await reader.next())?.data).toBe('0');
    await waitFor(async () => (await runOf(dev.url, asyncId))?.status === 'running', { what: 'the async run to start' });

    dev.child.kill('SIGTERM');
    await waitFor(async () => {
      const refused = await postJson(`${dev.url}/v4/dev/e2e/echo`, {});
      return refused.status === 503 ? refused : null;
    }, { what: 'new runs to be refused while draining' }).then(async (refused) => {
      expect(((await refused.json()) as { type: string }).type).toBe('https://runlet.dev/problems#draining');
    });

    const rest = await reader.rest();
    expect(rest.map((event) => event.data)).toEqual(['1', '2', '3', '4', '5']);
    await receiver.received(1);
    expect(JSON.parse(receiver.deliveries[0]!.body)).toMatchObject({ run_id: asyncId, status: 'success', result: 3 });
    expect(await dev.exited).toBe(0);

    const again = await devs.start(dataDir);
    expect(await runOf(again.url, asyncId)).toMatchObject({ status: 'success', webhook: { state: 'delivered', attempts: 1 } });
    expect(await runOf(again.url, streamId)).toMatchObject({ status: 'success', mode: 'stream' });
  }, 120_000);

  it('keeps an accepted async run listed when the process is killed right after the 202', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'runlet-kill-'));
    const dev = await devs.start(dataDir);
    const accepted = await postJson(`${dev.url}/v4/dev/e2e/sleep?async=true`, { seconds: 30 });
    expect(accepted.status).toBe(202);
    dev.child.kill('SIGKILL');
    await dev.exited;
    const runId = ((await accepted.json()) as { run_id: string }).run_id;

    const again = await devs.start(dataDir);
    const record = await runOf(again.url, runId);
    expect(record).not.toBeNull();
    // Listed, and not left pending forever: the restarted process knows nothing will complete it.
    expect(record).toMatchObject({ id: runId, async: true, status: 'failure', reason: 'replica_lost' });
  });

  it('drains through the admin endpoint, which answers once drained', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'runlet-admin-drain-'));
    const dev = await devs.start(dataDir);
    const accepted = await postJson(`${dev.url}/v4/dev/e2e/sleep?async=true`, { seconds: 1 });
    const runId = ((await accepted.json()) as { run_id: string }).run_id;
    expect((await fetch(`${dev.url}/admin/ready`)).status).toBe(200);
    // POST only, and with the header a client that is not a browser sends (local/dev-request-guard.ts).
    expect((await fetch(`${dev.url}/admin/drain`)).status).toBe(405);
    const drained = await fetch(`${dev.url}/admin/drain`, { method: 'POST', headers: { 'x-runlet-client': 'test' } });
    expect(drained.status).toBe(200);
    expect(await drained.json()).toEqual({ status: 'drained' });
    expect(await runOf(dev.url, runId)).toMatchObject({ status: 'success' });
    expect((await fetch(`${dev.url}/admin/ready`)).status).toBe(503);
    dev.child.kill('SIGTERM');
    expect(await dev.exited).toBe(0);
  });
});
