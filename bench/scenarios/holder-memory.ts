// What held calls cost the holder in memory (issue #21: a spike at one App at zero must not take the operator
// pod). A holder on the in-memory API server, in this process, holds sync calls to four Apps at zero that never
// start (no kubelet), each within its default bound (250 per App, 1,000 in all), with a small JSON body; the
// callers are another process, so their sockets are not counted. Measured after a full GC, before the calls
// and once the holder holds all of them: this process's RSS and V8 heap (used, plus external and array
// buffers: the bodies and socket buffers). Measured once per run.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { App } from '../../crds/app-schema.ts';
import { KubeApi } from '../../kube/client.ts';
import type { KubeObject } from '../../kube/objects.ts';
import { DEFAULT_HOLD_LIMITS } from '../../activator/hold-bounds.ts';
import { startHolder } from '../../activator/holder.ts';
import { startKubeApiServer } from '../../test/kube/index.ts';
import { testLogger } from '../../test/support/logger.ts';
import { pythonSpec, storedApp } from '../../test/support/operator-apps.ts';
import { waitFor } from '../../test/support/wait.ts';
import type { FigureSpec, RoundFigures } from '../report.ts';
import { kubePathOf } from '../../test/support/kube-path.ts';

const SCENARIO = 'holder-memory';
const NAMESPACE = 'held';
const APPS = DEFAULT_HOLD_LIMITS.calls / DEFAULT_HOLD_LIMITS.callsPerApp;
const CALLS = DEFAULT_HOLD_LIMITS.calls;
const BODY = JSON.stringify({ name: 'a caller held at zero', n: 12345 });
const MB = 1e6;

export const HOLDER_MEMORY_FIGURES: FigureSpec[] = [
  { key: 'holderMemory.rssMb', scenario: SCENARIO, label: `holder RSS added by ${CALLS} held sync calls (${APPS} Apps × ${DEFAULT_HOLD_LIMITS.callsPerApp}, the default bounds; ${BODY.length} B bodies)`, unit: 'MB', decimals: 1 },
  { key: 'holderMemory.heapMb', scenario: SCENARIO, label: `holder V8 heap, external and array buffers added by the same ${CALLS} calls`, unit: 'MB', decimals: 1 },
  { key: 'holderMemory.perCallKb', scenario: SCENARIO, label: 'holder RSS per held call', unit: 'kB', decimals: 1 },
];

/** The callers, in a process of their own: one connection per call, each a whole POST, held open for the answer. */
const CALLERS = `
const net = require('node:net');
const [port, calls, body, apps] = [Number(process.argv[1]), Number(process.argv[2]), process.argv[3], Number(process.argv[4])];
const sockets = [];
for (let i = 0; i < calls; i++) {
  const socket = net.connect(port, '127.0.0.1', () => {
    socket.write('POST /v4/${NAMESPACE}/app-' + (i % apps) + '/run HTTP/1.1\\r\\nhost: holder\\r\\ncontent-type: application/json\\r\\ncontent-length: ' + Buffer.byteLength(body) + '\\r\\n\\r\\n' + body);
  });
  socket.on('error', () => {});
  sockets.push(socket);
}
process.stdin.on('data', () => { for (const socket of sockets) socket.destroy(); process.exit(0); });
`;

function collectGarbage(): void {
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
}

function memory(): { rss: number; heap: number } {
  collectGarbage();
  const usage = process.memoryUsage();
  return { rss: usage.rss, heap: usage.heapUsed + usage.external + usage.arrayBuffers };
}

export async function measureHolderMemory(): Promise<RoundFigures> {
  const server = await startKubeApiServer({ namespaces: [NAMESPACE] });
  const api = new KubeApi(await server.credentials());
  const apps: App[] = [];
  for (let index = 0; index < APPS; index++) {
    const name = `app-${index}`;
    apps.push(storedApp(pythonSpec({ scaling: { minReplicas: 0, maxReplicas: 5, coldStartTimeout: 600 } }), { name, namespace: NAMESPACE }));
    const labels = { app: name };
    await api.create(kubePathOf(`/apis/apps/v1/namespaces/${NAMESPACE}/deployments`), {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name },
      spec: { replicas: 0, selector: { matchLabels: labels }, template: { metadata: { labels }, spec: { containers: [{ name: 'app', image: 'app:1' }] } } },
    } as KubeObject);
  }
  const holder = await startHolder({
    api,
    apps: { get: (namespace, name) => apps.find((app) => app.metadata.namespace === namespace && app.metadata.name === name) },
    appsSynced: async () => {},
    auth: null,
    holderKeys: async () => randomBytes(32),
    logger: testLogger(),
    identity: 'bench-holder',
    recordsNamespace: NAMESPACE,
    watchdogMs: 600_000,
    host: '127.0.0.1',
    port: 0,
    // Every App in one namespace: the memory measured is that of the whole bound, not of one namespace's share.
    limits: { callsPerNamespace: DEFAULT_HOLD_LIMITS.calls },
  });
  const held = () => apps.reduce((sum, app) => sum + holder.held(NAMESPACE, app.metadata.name), 0);
  const hold = async (calls: number) => {
    const callers = spawn(process.execPath, ['-e', CALLERS, new URL(holder.url).port, String(calls), BODY, String(APPS)], { stdio: ['pipe', 'inherit', 'inherit'] });
    await waitFor(() => held() === calls, { timeoutMs: 120_000, intervalMs: 50, what: `${calls} calls held` });
    return async () => {
      callers.stdin.end('stop');
      await new Promise((resolve) => callers.once('exit', resolve));
      // Callers gone: their calls leave the holder.
      await waitFor(() => holder.calls === 0, { timeoutMs: 60_000, intervalMs: 50, what: 'the held calls gone with their callers' });
    };
  };
  try {
    // A few calls first, gone before the baseline: the holder's code has run, its lazy parts made.
    await (await hold(4 * APPS))();
    const before = memory();
    const release = await hold(CALLS);
    const after = memory();
    await release();
    return {
      'holderMemory.rssMb': (after.rss - before.rss) / MB,
      'holderMemory.heapMb': (after.heap - before.heap) / MB,
      'holderMemory.perCallKb': (after.rss - before.rss) / CALLS / 1e3,
    };
  } finally {
    await holder.close();
    await api.close();
    await server.close();
  }
}
