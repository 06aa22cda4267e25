// Handing over a held async call, against the in-memory API server (its record a Secret, the App's ready pod
// watched) and a real HTTP server standing for the replica's sidecar, answering as scripted: a 503 is retried
// for as long as it lasts, any other answer but 202 only MAX_UNRECORDED_ANSWERS times before the call is dropped;
// a refusal of the caller (401, 403) drops it at once, and 409 (taken already) counts as handed over.
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
import { holderKeysFor, namespaceHolderKey } from '../operator/autoscaling/holder-key.ts';
import { ReadyPods } from './hold-pods.ts';
import { HELD_CALL_LABEL, HeldRecords } from './hold-records.ts';
import { wakeDeployment } from './hold-wake.ts';

const NAMESPACE = 'team-a';
const APP = 'hello';
const HOLDER_KEY = randomBytes(32);
const KEY_SOURCE = { namespace: 'runlet-system', name: 'runlet-holder-key' };
/** What the sidecars of NAMESPACE hold: their namespace's key, not the operator's. */
const NAMESPACE_KEY = namespaceHolderKey(HOLDER_KEY, NAMESPACE);
const TOKEN = 'Bearer caller-token';
const BODY = '{"n":1}';
const PODS = `/api/v1/namespaces/${NAMESPACE}/pods`;

describe('handing a held async call to a replica', () => {
  let server: KubeApiServer;
  let api: KubeApi;
  let pods: ReadyPods;
  let replica: Server;
  /** The replica's answers, in order; 202 once they run out. */
  let script: number[];
  /** The held run ids of the calls the replica received. */
  let received: string[];

  beforeEach(async () => {
    server = await startKubeApiServer({ namespaces: [NAMESPACE] });
    api = new KubeApi(await server.credentials());
    const labels = { [APP_LABEL]: APP };
    await api.create(`/apis/apps/v1/namespaces/${NAMESPACE}/deployments`, {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: APP },
      spec: { replicas: 1, selector: { matchLabels: labels }, template: { metadata: { labels }, spec: { containers: [{ name: 'app', image: 'app:1' }] } } },
    } as KubeObject);
    const pod = await api.create(PODS, { apiVersion: 'v1', kind: 'Pod', metadata: { name: `${APP}-1`, labels }, spec: { containers: [{ name: 'app', image: 'app:1' }] } } as KubeObject);
    await api.replace(`${PODS}/${APP}-1/status`, { ...pod, status: { podIP: '127.0.0.1', conditions: [{ type: 'Ready', status: 'True' }] } } as KubeObject);
    pods = new ReadyPods({ api, logger: testLogger(), watchdogMs: 60_000 });
    pods.start();

    script = [];
    received = [];
    replica = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.once('end', () => {
        const held = verifyHeldRun(NAMESPACE_KEY, request.headers[HELD_RUN_HEADER], { method: request.method!, url: request.url!, authorization: request.headers.authorization });
        received.push(held !== null && held.bodySha256 === bodySha256(Buffer.concat(chunks)) ? held.runId : 'unsigned');
        const status = script.shift() ?? 202;
        response.writeHead(status, { 'content-type': 'application/json' }).end(status === 202 ? '{}' : '{"title":"scripted"}');
      });
    });
    replica.listen(0, '127.0.0.1');
    await once(replica, 'listening');
  });

  afterEach(async () => {
    replica.close();
    await pods.stop();
    await api.close();
    await server.close();
  });

  /** Holds one async call (its record saved) and hands it over; what the dispatcher reported. */
  async function holdAndHandOver(): Promise<{ runId: string; refused: string[]; handedOver: number; recordsLeft: number }> {
    const records = new HeldRecords({ api, identity: 'holder-test', staleClaimMs: 60_000 });
    const runId = newRunId();
    const record = await records.save({ runId, namespace: NAMESPACE, appName: APP, method: 'POST', url: `/v4/${NAMESPACE}/${APP}/run?async=true`, headers: { authorization: TOKEN }, body: Buffer.from(BODY), acceptedAt: Date.now() });
    /** Each call dropped: why, and the last answer's status. */
    const refused: string[] = [];
    let handedOver = 0;
    const dispatcher = createDispatcher({
      apps: { get: () => storedApp({ ...pythonSpec(), scaling: { minReplicas: 0, maxReplicas: 1 } }, { name: APP, namespace: NAMESPACE }) },
      appsSynced: async () => {},
      records,
      pods,
      wake: (namespace, appName) => wakeDeployment(api, namespace, appName),
      replicaAddress: () => ({ host: '127.0.0.1', port: (replica.address() as AddressInfo).port }),
      coldStartTimeoutMs: () => 10_000,
      holderKeys: holderKeysFor(HOLDER_KEY, KEY_SOURCE),
      logger: testLogger(),
      retryDelayMs: 10,
      onDropped: (_call, why, status) => refused.push(`${why} ${status}`),
      onHandedOver: () => (handedOver += 1),
    });
    await dispatcher.handOver(record);
    const left = await api.list(`/api/v1/namespaces/${NAMESPACE}/secrets`, { labelSelector: HELD_CALL_LABEL });
    return { runId, refused, handedOver, recordsLeft: left.items.length };
  }

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
