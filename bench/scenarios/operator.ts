// The operator reconciling 500 Apps in 50 namespaces, as the compiled `runlet operator` in its own process (so
// its memory is its own), against an in-memory Kubernetes API server of test/kube running in this process (no
// load is generated here meanwhile, and its Apps stay apart from the sidecars' API server): the time from
// the first App created to every App reconciled (ChildrenApplied) at its generation with the operator's queue empty, and the
// operator's peak RSS. Measured once per run, after the rounds: it is the slowest scenario and shares no
// server with the others. The cluster helpers are the tests' fake cluster (test/support/fake-cluster.ts).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { App } from '../../crds/app-schema.ts';
import type { KubeObject } from '../../kube/objects.ts';
import { PYTHON_IMAGE, SIDECAR_IMAGE, pythonSpec } from '../../test/support/operator-apps.ts';
import { createCodeConfigMap, createNamespace, isAppliedAtGeneration, paths, prepareCluster } from '../../test/support/fake-cluster.ts';
import { startKubeApiServer } from '../../test/kube/index.ts';
import { waitFor } from '../../test/support/wait.ts';
import { COMPILED_CLI, IMAGE_ENV } from '../build.ts';
import type { ProcessGroup } from '../processes.ts';
import type { FigureSpec, RoundFigures } from '../report.ts';
import { kubePathOf } from '../../test/support/kube-path.ts';

const SCENARIO = 'operator';
const NAMESPACES = 50;
const APPS = 500;
const STEADY_TIMEOUT_MS = 240_000;
/** Polled every 200 ms: the steady time is measured to that grain, without loading the operator with probes. */
const STEADY_WAIT = { timeoutMs: STEADY_TIMEOUT_MS, intervalMs: 200 };

export const OPERATOR_FIGURES: FigureSpec[] = [
  { key: 'operator.steadySeconds', scenario: SCENARIO, label: `${APPS} Apps (${NAMESPACES} namespaces) created to steady state, in-memory API server (one run)`, unit: 's', decimals: 1, target: { op: '<=', value: 30 } },
  { key: 'operator.peakRssMb', scenario: SCENARIO, label: 'operator peak RSS meanwhile', unit: 'MB', decimals: 0, target: { op: '<=', value: 250 } },
];

export async function measureOperator(group: ProcessGroup, workDir: string): Promise<RoundFigures> {
  const cluster = await prepareCluster(await startKubeApiServer({ historySize: 10_000 }));
  try {
    const kubeconfig = join(workDir, 'operator-kubeconfig');
    await cluster.server.writeKubeconfig(kubeconfig);
    const config = join(workDir, 'operator.yaml');
    writeFileSync(config, [`sidecarImage: ${SIDECAR_IMAGE}`, `pythonRuntimeImage: ${PYTHON_IMAGE}`, 'ingress: { className: nginx, host: apps.example }', 'server: { host: 127.0.0.1, port: 0, metricsPort: 0 }', 'logLevel: info', 'holder: { enabled: false }'].join('\n'));
    for (let n = 0; n < NAMESPACES; n++) await createNamespace(cluster.api, `bench-${n}`);

    const operator = group.start({
      name: 'operator',
      command: process.execPath,
      args: [COMPILED_CLI, 'operator', '--config', config, '--identity', 'bench', '--leader-election-namespace', 'default'],
      env: { ...process.env, ...IMAGE_ENV, KUBECONFIG: kubeconfig },
    });
    // pino writes `metrics` before `msg` on the line that says where /metrics is.
    const metricsUrl = (await operator.waitForOutput(/"metrics":"([^"]+)"[^\n]*"operator listening"/, 60_000))[1]!;
    await waitFor(async () => (await metric(metricsUrl, 'runlet_operator_leader')) === 1, { ...STEADY_WAIT, what: 'the operator to lead' });

    const startedAt = performance.now();
    await inParallel(Array.from({ length: APPS }, (_, i) => i), 16, async (i) => {
      const namespace = `bench-${i % NAMESPACES}`;
      const name = `app-${i}`;
      await createCodeConfigMap(cluster.api, namespace, `${name}-code`, name, { 'main.py': `def run():\n    return ${JSON.stringify(name)}\n` });
      await cluster.api.create(paths.app(namespace), { apiVersion: 'runlet.dev/v1alpha1', kind: 'App', metadata: { name }, spec: pythonSpec({}, `${name}-code`) } as KubeObject);
    });
    await waitFor(async () => (await reconciledApps(cluster.api)) === APPS && (await metric(metricsUrl, 'runlet_operator_queue_depth')) === 0, {
      ...STEADY_WAIT,
      what: `all ${APPS} Apps reconciled with the operator's queue empty`,
    });
    const steadySeconds = (performance.now() - startedAt) / 1000;
    const peakRssMb = operator.peakRssMb();
    await operator.stop();
    return { 'operator.steadySeconds': steadySeconds, 'operator.peakRssMb': peakRssMb };
  } finally {
    await cluster.close();
  }
}

async function reconciledApps(api: Awaited<ReturnType<typeof prepareCluster>>['api']): Promise<number> {
  const list = await api.list<App & KubeObject>(kubePathOf('/apis/runlet.dev/v1alpha1/apps'));
  return list.items.filter(isAppliedAtGeneration).length;
}

async function metric(url: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return text
    .split('\n')
    .filter((line) => line.startsWith(name))
    .reduce((sum, line) => sum + Number(line.split(' ').at(-1)), 0);
}

async function inParallel<T>(items: T[], limit: number, run: (item: T) => Promise<unknown>): Promise<void> {
  const queue = [...items];
  await Promise.all(
    Array.from({ length: limit }, async () => {
      for (let item = queue.shift(); item !== undefined; item = queue.shift()) await run(item);
    }),
  );
}
