// Handing over a held async call, against the in-memory API server (its record a Secret in the holder's
// namespace, the App's ready pod in its replicas Service's Endpoints) and a real HTTP server standing for the replica's sidecar, answering as
// scripted: a 503 is retried for as long as it lasts, any other answer but 202 only MAX_UNRECORDED_ANSWERS times
// before the call is dropped; a refusal of the caller (401, 403) drops it at once, and 409 (taken already) counts
// as handed over. The record keeps no token, and one altered at rest is dropped unread.
import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { APP_LABEL } from '../crds/api-group.ts';
import { KubeApi } from '../kube/client.ts';
import type { KubeObject } from '../kube/objects.ts';
import { HELD_RUN_HEADER, bodySha256, verifyHeldRun } from '../run-request/auth/held-run.ts';
import { newRunId } from '../run-request/run-id.ts';
import { startKubeApiServer, type KubeApiServer } from '../test/kube/index.ts';
import { testLogger } from '../test/support/logger.ts';
import { pythonSpec, storedApp } from '../test/support/operator-apps.ts';
import { createDispatcher, MAX_UNRECORDED_ANSWERS } from './hold-dispatch.ts';
import { namespaceHolderKeys } from '../operator/autoscaling/holder-key.ts';
import { renderHolderKeyCopy } from '../operator/render/holder-key.ts';
import { ReadyReplicas } from './hold-replicas.ts';
import { renderReplicasService } from '../operator/render/service.ts';
import { HELD_CALL_LABEL, HeldRecords, type HeldRecord } from './hold-records.ts';
import { wakeDeployment } from './hold-wake.ts';
import { kubePathOf } from '../test/support/kube-path.ts';

const NAMESPACE = 'team-a';
const APP = 'hello';
/** What the sidecars of NAMESPACE hold: their namespace's own key, in its Secret, which the holder reads. */
const NAMESPACE_KEY = randomBytes(32);
const TOKEN = 'Bearer caller-token';
const BODY = '{"n":1}';
const PODS = `/api/v1/namespaces/${NAMESPACE}/pods`;
/** The holder's own namespace, where its records are. */
const HOLDER_NAMESPACE = 'runlet-system';
const RECORDS = `/api/v1/namespaces/${HOLDER_NAMESPACE}/secrets`;

describe('handing a held async call to a replica', () => {
  let server: KubeApiServer;
  let api: KubeApi;
  let replicas: ReadyReplicas;
  let replica: Server;
  /** The replica's answers, in order; 202 once they run out. */
  let script: number[];
  /** The held run ids of the calls the replica received. */
  let received: string[];
  /** What the replica was told of each call's caller: `verified` by the holder, else the Authorization it got (`none`). */
  let callers: string[];

  beforeEach(async () => {
    server = await startKubeApiServer({ namespaces: [NAMESPACE, 'team-b', HOLDER_NAMESPACE] });
    api = new KubeApi(await server.credentials());
    await api.create(kubePathOf(`/api/v1/namespaces/${NAMESPACE}/secrets`), renderHolderKeyCopy(NAMESPACE, [], NAMESPACE_KEY) as KubeObject);
    // Another tenant's namespace, with its own key: a record moved there is not signed with it.
    await api.create(kubePathOf('/api/v1/namespaces/team-b/secrets'), renderHolderKeyCopy('team-b', [], randomBytes(32)) as KubeObject);
    const labels = { [APP_LABEL]: APP };
    await api.create(kubePathOf(`/apis/apps/v1/namespaces/${NAMESPACE}/deployments`), {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: APP },
      spec: { replicas: 1, selector: { matchLabels: labels }, template: { metadata: { labels }, spec: { containers: [{ name: 'app', image: 'app:1' }] } } },
    } as KubeObject);
    // The App's replicas Service, as the operator renders it: its Endpoints list the ready pod.
    const service = renderReplicasService(storedApp({ ...pythonSpec(), scaling: { minReplicas: 0, maxReplicas: 1 } }, { name: APP, namespace: NAMESPACE }));
    await api.create(kubePathOf(`/api/v1/namespaces/${NAMESPACE}/services`), service as KubeObject);
    const pod = await api.create(kubePathOf(PODS), { apiVersion: 'v1', kind: 'Pod', metadata: { name: `${APP}-1`, labels }, spec: { containers: [{ name: 'app', image: 'app:1' }] } } as KubeObject);
    await api.replace(kubePathOf(`${PODS}/${APP}-1/status`), { ...pod, status: { podIP: '192.0.2.1', conditions: [{ type: 'Ready', status: 'True' }] } } as KubeObject);
    replicas = new ReadyReplicas({ api, logger: testLogger(), watchdogMs: 60_000 });

    script = [];
    received = [];
    callers = [];
    replica = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.once('end', () => {
        const held = verifyHeldRun(NAMESPACE_KEY, request.headers[HELD_RUN_HEADER], { method: request.method!, url: request.url!, authorization: request.headers.authorization });
        received.push(held !== null && held.bodySha256 === bodySha256(Buffer.concat(chunks)) ? held.runId : 'unsigned');
        callers.push(held?.callerVerified === true ? 'verified' : (request.headers.authorization ?? 'none'));
        const status = script.shift() ?? 202;
        response.writeHead(status, { 'content-type': 'application/json' }).end(status === 202 ? '{}' : '{"title":"scripted"}');
      });
    });
    replica.listen(0, '127.0.0.1');
    await once(replica, 'listening');
  });

  afterEach(async () => {
    replica.close();
    await replicas.stop();
    await api.close();
    await server.close();
  });

  function heldRecords(): HeldRecords {
    return new HeldRecords({ api, namespace: HOLDER_NAMESPACE, identity: 'holder-test', staleClaimMs: 60_000, ttlMs: 60_000, keys: namespaceHolderKeys(api) });
  }

  /** Records one async call the holder took, its caller authenticated for NAMESPACE (null: nobody), with TOKEN. */
  function save(records: HeldRecords, authenticatedProject: string | null = NAMESPACE): Promise<HeldRecord> {
    const call = { runId: newRunId(), namespace: NAMESPACE, appName: APP, method: 'POST', url: `/v4/${NAMESPACE}/${APP}/run?async=true`, headers: { authorization: TOKEN }, body: Buffer.from(BODY) };
    return records.save({ ...call, acceptedAt: Date.now(), authenticatedProject });
  }

  /** Holds one async call (its record saved, or `tamper`ed with once saved) and hands it over; what the dispatcher reported. */
  async function holdAndHandOver(options: { authenticatedProject?: string | null; tamper?: (record: HeldRecord) => HeldRecord } = {}): Promise<{ runId: string; refused: string[]; handedOver: number; altered: number; recordsLeft: number }> {
    const records = heldRecords();
    const saved = await save(records, options.authenticatedProject);
    const record = options.tamper === undefined ? saved : await api.replace<HeldRecord>(kubePathOf(`${RECORDS}/${saved.metadata!.name!}`), options.tamper(saved));
    const runId = (await records.callOf(saved)).runId;
    let altered = 0;
    /** Each call dropped: why, and the last answer's status. */
    const refused: string[] = [];
    let handedOver = 0;
    const dispatcher = createDispatcher({
      apps: { get: () => storedApp({ ...pythonSpec(), scaling: { minReplicas: 0, maxReplicas: 1 } }, { name: APP, namespace: NAMESPACE }) },
      appsSynced: async () => {},
      records,
      replicas,
      wake: (namespace, appName) => wakeDeployment(api, namespace, appName),
      replicaAddress: () => ({ host: '127.0.0.1', port: (replica.address() as AddressInfo).port }),
      coldStartTimeoutMs: () => 10_000,
      holderKeys: namespaceHolderKeys(api),
      logger: testLogger(),
      retryDelayMs: 10,
      onDropped: (_call, why, status) => refused.push(`${why} ${status}`),
      onHandedOver: () => (handedOver += 1),
      onAltered: () => (altered += 1),
    });
    await dispatcher.handOver(record);
    const left = await api.list(kubePathOf(RECORDS), { labelSelector: HELD_CALL_LABEL });
    return { runId, refused, handedOver, altered, recordsLeft: left.items.length };
  }

  it('keeps no token at rest, in the holder’s namespace: the hand-over vouches for the caller the holder authenticated, and sends no token', async () => {
    const records = heldRecords();
    const record = await save(records);
    expect(record.metadata?.namespace).toBe(HOLDER_NAMESPACE);
    const atRest = Object.values(record.data ?? {}).map((value) => Buffer.from(value, 'base64').toString('utf8'));
    expect(atRest.join('\n')).not.toContain('caller-token');
    expect(atRest.join('\n').toLowerCase()).not.toContain('authorization');
    expect(JSON.stringify(record)).not.toContain(Buffer.from(TOKEN).toString('base64'));
    expect((await api.list<KubeObject>(kubePathOf(`/api/v1/namespaces/${NAMESPACE}/secrets`))).items.map((secret) => secret.metadata?.name), 'nothing in the App’s namespace but its key').toEqual(['runlet-holder-key']);
    await records.remove(record);

    const outcome = await holdAndHandOver();
    expect(outcome).toMatchObject({ refused: [], handedOver: 1, recordsLeft: 0 });
    expect(callers).toEqual(['verified']);
  });

  it('a call the holder authenticated nobody for (auth off) is handed over unvouched, with no token: the replica authenticates it as it comes', async () => {
    const outcome = await holdAndHandOver({ authenticatedProject: null });
    expect(outcome).toMatchObject({ refused: [], handedOver: 1, recordsLeft: 0 });
    expect(callers).toEqual(['none']);
  });

  it.each([
    ['another App namespace (its key is not this one’s)', (call: Record<string, unknown>) => ({ ...call, namespace: 'team-b', url: `/v4/team-b/${APP}/run?async=true` })],
    ['another webhook', (call: Record<string, unknown>) => ({ ...call, url: `/v4/${NAMESPACE}/${APP}/run?async=true&webhookEndpoint=https%3A%2F%2Fevil.example%2F` })],
    ['the authenticated project changed', (call: Record<string, unknown>) => ({ ...call, authenticatedProject: 'team-b' })],
  ])('a record altered at rest (%s) is dropped unread: no replica gets it', async (_what, change) => {
    const outcome = await holdAndHandOver({
      tamper: (record) => {
        const call = JSON.parse(Buffer.from(record.data!.call!, 'base64').toString('utf8')) as Record<string, unknown>;
        return { ...record, data: { ...record.data, call: Buffer.from(JSON.stringify(change(call))).toString('base64') } };
      },
    });
    expect(outcome).toMatchObject({ refused: [], handedOver: 0, altered: 1, recordsLeft: 0 });
    expect(received).toEqual([]);
  });

  it('a record whose body was replaced at rest is dropped unread', async () => {
    const outcome = await holdAndHandOver({ tamper: (record) => ({ ...record, data: { ...record.data, body: Buffer.from('{"n":1000000}').toString('base64') } }) });
    expect(outcome).toMatchObject({ handedOver: 0, altered: 1, recordsLeft: 0 });
    expect(received).toEqual([]);
  });

  it('a call the replica records (202) is handed over once, and its record deleted', async () => {
    const outcome = await holdAndHandOver();
    expect(outcome).toMatchObject({ refused: [], handedOver: 1, recordsLeft: 0 });
    expect(received).toEqual([outcome.runId]);
  });

  it.each([401, 403])('a refusal of its caller (%i) is reported and the call dropped at once: no replica records it', async (status) => {
    script = [status];
    const outcome = await holdAndHandOver();
    expect(outcome).toMatchObject({ refused: [`caller_refused ${status}`], handedOver: 0, recordsLeft: 0 });
    expect(received).toEqual([outcome.runId]);
  });

  it('409 (its run id taken: an earlier attempt was accepted, its answer lost) counts as handed over', async () => {
    script = [409];
    const outcome = await holdAndHandOver();
    expect(outcome).toMatchObject({ refused: [], handedOver: 1, recordsLeft: 0 });
    expect(received).toEqual([outcome.runId]);
  });

  it('503 is tried again for as long as it lasts', async () => {
    script = Array.from({ length: MAX_UNRECORDED_ANSWERS + 2 }, () => 503);
    const outcome = await holdAndHandOver();
    expect(outcome).toMatchObject({ refused: [], handedOver: 1, recordsLeft: 0 });
    expect(received).toHaveLength(MAX_UNRECORDED_ANSWERS + 3);
  });

  it('another answer is tried again: a replica that fails for a while, then records the call, gets it', async () => {
    script = [500, 408, 503, 502];
    const outcome = await holdAndHandOver();
    expect(outcome).toMatchObject({ refused: [], handedOver: 1, recordsLeft: 0 });
    expect(received).toHaveLength(5);
  });

  it(`a call no replica records is dropped after ${MAX_UNRECORDED_ANSWERS} such answers, 503s not counted`, async () => {
    script = [400, 503, ...Array.from({ length: MAX_UNRECORDED_ANSWERS }, () => 404)];
    const outcome = await holdAndHandOver();
    expect(outcome).toMatchObject({ refused: ['unrecorded 404'], handedOver: 0, recordsLeft: 0 });
    // The 400, the 503, then four 404s: the fifth answer that is not a 503 drops it.
    expect(received).toHaveLength(MAX_UNRECORDED_ANSWERS + 1);
    expect(new Set(received)).toEqual(new Set([outcome.runId]));
  });
});
