// Cancelling a run through `runlet dev`'s management API: a queued run never starts, a running one is stopped
// (a plain function's worker replaced, a generator closed), the caller and the webhook are told, and the
// operation answers 202, 409 for a finished run, and 202 again when repeated.
import { existsSync } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Problems } from '../../crds/problems.ts';
import type { RunRecord } from '../../crds/run-record-schema.ts';
import { makePythonApp } from '../support/app-dir.ts';
import { makeCustomApp } from '../support/custom-app.ts';
import { FIXTURE_APPS, postJson, startTestDevServer, type TestDevServer } from '../support/dev-server.ts';
import { EventReader } from '../support/sse.ts';
import { verifyWebhookSignature } from '../support/signature.ts';
import { waitFor } from '../support/wait.ts';
import { WebhookReceiver } from '../support/webhook-receiver.ts';

const SECRET = 'cancel-secret';

let dev: TestDevServer;
let receiver: WebhookReceiver;
let gates: string;

beforeAll(async () => {
  gates = await mkdtemp(join(tmpdir(), 'runlet-cancel-gates-'));
  receiver = await WebhookReceiver.start();
  dev = await startTestDevServer({
    appDirs: [
      `${FIXTURE_APPS}/e2e`,
      await makePythonApp('narrow', '[scaling]\nreplica_concurrency = 1\nresponse_grace_period = 60'),
      await makeCustomApp('web'),
    ],
  });
});
afterAll(async () => {
  await dev?.dispose();
  await receiver?.close();
});

function runUrl(app: string, runId: string): string {
  return `${dev.url}/v2/projects/dev/apps/${app}/runs/${runId}`;
}

function cancel(app: string, runId: string): Promise<Response> {
  return fetch(`${runUrl(app, runId)}/cancel`, { method: 'POST', headers: { 'x-runlet-client': 'test' } });
}

async function record(app: string, runId: string): Promise<RunRecord | null> {
  const response = await fetch(runUrl(app, runId));
  return response.status === 200 ? ((await response.json()) as { item: RunRecord }).item : null;
}

function inStatus(app: string, runId: string, status: RunRecord['status']): Promise<RunRecord> {
  return waitFor(async () => {
    const item = await record(app, runId);
    return item?.status === status ? item : null;
  }, { what: `run ${runId} to be ${status}` });
}

/** The newest run of the app that is running: a sync or stream call's id is known only from the runs list. */
function runningRun(app: string, functionName: string): Promise<RunRecord> {
  return waitFor(async () => {
    const response = await fetch(`${dev.url}/v2/projects/dev/apps/${app}/runs?status=running`);
    const { items } = (await response.json()) as { items: RunRecord[] };
    return items.find((item) => item.functionName === functionName) ?? null;
  }, { what: `a running ${functionName} run of ${app}` });
}

async function expectAccepted(response: Response, runId: string): Promise<RunRecord> {
  expect(response.status).toBe(202);
  const { item } = (await response.json()) as { item: RunRecord };
  expect(item.id).toBe(runId);
  return item;
}

async function expectProblem(response: Response, code: string, status: number): Promise<{ detail: string }> {
  expect(response.status).toBe(status);
  expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  const body = (await response.json()) as { type: string; detail: string };
  expect(body.type).toBe(`https://runlet.dev/problems#${code}`);
  return body;
}

describe('cancelling a run in runlet dev', () => {
  it('stops a running sync call: the caller gets 409 run-cancelled, the run is cancelled, the worker is replaced', async () => {
    const gate = join(gates, 'sync-never');
    const call = postJson(`${dev.url}/v4/dev/narrow/gated`, { gate });
    const running = await runningRun('narrow', 'gated');

    const accepted = await expectAccepted(await cancel('narrow', running.id), running.id);
    expect(['running', 'cancelled']).toContain(accepted.status);
    const answer = await call;
    expect(answer.headers.get('x-request-id')).toBe(running.id);
    const problem = await expectProblem(answer, Problems.runCancelled.code, 409);
    expect(problem.detail).toMatch(/cancelled/);

    const done = await inStatus('narrow', running.id, 'cancelled');
    expect(done).toMatchObject({ reason: 'cancel_requested', statusCode: 409, error: { type: 'Cancelled' } });
    // The app's one slot is free again and its worker serves the next call: the gated one no longer holds it.
    const next = await postJson(`${dev.url}/v4/dev/narrow/echo`, { after: 'cancel' });
    expect(next.status).toBe(200);
    expect(await next.json()).toMatchObject({ result: { after: 'cancel' } });
  });

  it('ends a stream already answering with event: error, the generator closed', async () => {
    const gate = join(gates, 'stream-never');
    const response = await postJson(`${dev.url}/v4/dev/e2e/stepped`, { gate }, { accept: 'text/event-stream' });
    expect(response.status).toBe(200);
    const runId = response.headers.get('x-request-id')!;
    const events = new EventReader(response.body!);
    expect(await events.next()).toMatchObject({ data: 'first' });

    await expectAccepted(await cancel('e2e', runId), runId);
    const rest = await events.rest();
    expect(rest).toHaveLength(1);
    expect(rest[0]).toMatchObject({ event: 'error' });
    expect(JSON.parse(rest[0]!.data)).toMatchObject({ type: 'Cancelled' });
    expect(await inStatus('e2e', runId, 'cancelled')).toMatchObject({ reason: 'cancel_requested', statusCode: 200, error: { type: 'Cancelled' } });
    // A generator is closed once its current next() returns: let it return, so the runtime is not held.
    await writeFile(gate, '');
  });

  it("cuts a custom app's answer already under way, and records it cancelled", async () => {
    const response = await fetch(`${dev.url}/v4/dev/web/endless`, { method: 'POST' });
    expect(response.status).toBe(200);
    const runId = response.headers.get('x-request-id')!;
    const reader = response.body!.getReader();
    expect((await reader.read()).done).toBe(false);

    await expectAccepted(await cancel('web', runId), runId);
    // The answer ends cut, not finished: the caller can tell it was not whole.
    await expect((async () => {
      for (;;) if ((await reader.read()).done) return 'ended';
    })()).rejects.toThrow();
    // Recorded with the status its caller was sent, as a stream cancelled mid-answer is.
    expect(await inStatus('web', runId, 'cancelled')).toMatchObject({ reason: 'cancel_requested', statusCode: 200, error: { type: 'Cancelled' } });
  });

  it('stops a running async run and sends its webhook the outcome, signed', async () => {
    const gate = join(gates, 'async-never');
    const hook = encodeURIComponent(receiver.at('/cancelled').href);
    const accepted = await postJson(`${dev.url}/v4/dev/e2e/gated?async=true&webhookEndpoint=${hook}`, { gate }, { 'x-webhook-secret': SECRET });
    expect(accepted.status).toBe(202);
    const { run_id: runId } = (await accepted.json()) as { run_id: string };
    await inStatus('e2e', runId, 'running');
    const before = receiver.deliveries.length;

    await expectAccepted(await cancel('e2e', runId), runId);
    await receiver.received(before + 1);
    const delivery = receiver.deliveries.find((d) => d.path === '/cancelled' && JSON.parse(d.body).run_id === runId)!;
    expect(JSON.parse(delivery.body)).toMatchObject({ run_id: runId, status: 'failure', status_code: 409, error: { type: 'Cancelled' } });
    expect(verifyWebhookSignature(SECRET, delivery.headers, delivery.body)).toBe(true);
    const done = await inStatus('e2e', runId, 'cancelled');
    expect(done).toMatchObject({ reason: 'cancel_requested', webhook: { state: 'delivered' } });
    expect(done.startedAt).not.toBeNull();
  });

  it('cancels a running async def: the coroutine sees CancelledError', async () => {
    const gate = join(gates, 'coroutine-never');
    const mark = join(gates, 'coroutine-cancelled');
    const call = postJson(`${dev.url}/v4/dev/e2e/awaits_gate`, { gate, cancelled_mark: mark });
    const running = await runningRun('e2e', 'awaits_gate');

    await expectAccepted(await cancel('e2e', running.id), running.id);
    await expectProblem(await call, Problems.runCancelled.code, 409);
    await waitFor(() => existsSync(mark), { what: 'the coroutine to be cancelled' });
    expect(await inStatus('e2e', running.id, 'cancelled')).toMatchObject({ reason: 'cancel_requested' });
  });

  it('answers a sync call cancelled while it waits in the queue 409 run-cancelled; it never started', async () => {
    const ahead = join(gates, 'sync-ahead');
    const first = await postJson(`${dev.url}/v4/dev/narrow/gated?async=true`, { gate: ahead });
    const firstId = ((await first.json()) as { run_id: string }).run_id;
    await inStatus('narrow', firstId, 'running');
    const call = postJson(`${dev.url}/v4/dev/narrow/echo`, { queued: 'sync' });
    const waiting = await waitFor(async () => {
      const response = await fetch(`${dev.url}/v2/projects/dev/apps/narrow/runs?status=pending`);
      return ((await response.json()) as { items: RunRecord[] }).items.find((item) => item.functionName === 'echo') ?? null;
    }, { what: 'the sync call to wait in the queue' });

    await expectAccepted(await cancel('narrow', waiting.id), waiting.id);
    await expectProblem(await call, Problems.runCancelled.code, 409);
    expect(await inStatus('narrow', waiting.id, 'cancelled')).toMatchObject({ reason: 'cancel_requested', startedAt: null });
    await writeFile(ahead, '');
    await inStatus('narrow', firstId, 'success');
  });

  it('keeps a queued async run from ever starting; the run ahead of it goes on', async () => {
    const ahead = join(gates, 'ahead');
    const first = await postJson(`${dev.url}/v4/dev/narrow/gated?async=true`, { gate: ahead, result: 'ahead' });
    const firstId = ((await first.json()) as { run_id: string }).run_id;
    await inStatus('narrow', firstId, 'running');
    const queued = await postJson(`${dev.url}/v4/dev/narrow/echo?async=true`, { queued: true });
    const queuedId = ((await queued.json()) as { run_id: string }).run_id;
    expect((await record('narrow', queuedId))?.status).toBe('pending');

    const item = await expectAccepted(await cancel('narrow', queuedId), queuedId);
    expect(item.startedAt).toBeNull();
    const done = await inStatus('narrow', queuedId, 'cancelled');
    expect(done).toMatchObject({ reason: 'cancel_requested', startedAt: null, error: { type: 'Cancelled' } });

    await writeFile(ahead, '');
    expect(await inStatus('narrow', firstId, 'success')).toMatchObject({ statusCode: 200 });
    // The queue had only the cancelled run behind the first: it never ran, so it is still as it was left.
    expect(await record('narrow', queuedId)).toEqual(done);
  });

  it('answers 202 again to a repeated cancel, 409 run-finished for a run finished otherwise, 404 for no such run', async () => {
    const gate = join(gates, 'repeat-never');
    const accepted = await postJson(`${dev.url}/v4/dev/e2e/gated?async=true`, { gate });
    const { run_id: runId } = (await accepted.json()) as { run_id: string };
    await inStatus('e2e', runId, 'running');
    await expectAccepted(await cancel('e2e', runId), runId);
    await expectAccepted(await cancel('e2e', runId), runId);
    await inStatus('e2e', runId, 'cancelled');
    const again = await expectAccepted(await cancel('e2e', runId), runId);
    expect(again).toMatchObject({ status: 'cancelled', reason: 'cancel_requested' });

    const finished = await postJson(`${dev.url}/v4/dev/e2e/echo`, { done: true });
    const finishedId = finished.headers.get('x-request-id')!;
    await inStatus('e2e', finishedId, 'success');
    const refused = await expectProblem(await cancel('e2e', finishedId), Problems.runFinished.code, 409);
    expect(refused.detail).toContain('success');
    expect(await record('e2e', finishedId)).toMatchObject({ status: 'success' });

    await expectProblem(await cancel('e2e', '01900000-0000-7000-8000-000000000000'), Problems.runNotFound.code, 404);
  });
});
