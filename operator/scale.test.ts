// 500 Apps in 50 namespaces, reconciled by `runlet operator` running as its own process (so its memory and
// CPU are measured alone), against the in-memory API server. Two scenarios: Apps created while the operator
// runs, and a fresh operator process starting on the 500 existing Apps. Targets: ≤ 30 s each, peak RSS ≤
// 250 MB. Wall time is printed; what is asserted is the operator's CPU time, which a loaded machine does not
// inflate the way it inflates wall time (on an idle 2-core machine they are about 5-9 s of wall time each).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKubeApiServer, type KubeApiServer } from '../test/kube/index.ts';
import type { App } from '../crds/app-schema.ts';
import { waitFor } from '../test/support/wait.ts';
import type { KubeObject } from './kube-api.ts';
import { PYTHON_IMAGE, SIDECAR_IMAGE, pythonSpec } from './test-support/apps.ts';
import { createCodeConfigMap, createNamespace, isReadyAtGeneration, paths, prepareCluster, type TestCluster } from './test-support/cluster.ts';

const NAMESPACES = 50;
const APPS_PER_NAMESPACE = 10;
const APPS = NAMESPACES * APPS_PER_NAMESPACE;
const TARGET_SECONDS = 30;
const TARGET_RSS_MB = 250;
const CLI = new URL('../cli/runlet.ts', import.meta.url).pathname;

let cluster: TestCluster<KubeApiServer>;
let workDir: string;

beforeAll(async () => {
  cluster = await prepareCluster(await startKubeApiServer({ historySize: 10_000 }));
  workDir = await mkdtemp(join(tmpdir(), 'runlet-operator-scale-'));
  await cluster.server.writeKubeconfig(join(workDir, 'kubeconfig'));
  await writeFile(
    join(workDir, 'operator.yaml'),
    [`sidecarImage: ${SIDECAR_IMAGE}`, `pythonRuntimeImage: ${PYTHON_IMAGE}`, 'ingress: { className: nginx, host: apps.example }', 'server: { host: 127.0.0.1, port: 0 }', 'logLevel: info'].join('\n'),
  );
  for (let n = 0; n < NAMESPACES; n += 1) await createNamespace(cluster.api, `scale-${n}`);
});

afterAll(async () => {
  await cluster?.close();
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

interface OperatorProcess {
  child: ChildProcess;
  /** http://127.0.0.1:port of /metrics */
  url: string;
  /** Peak and current resident memory of the operator process, from /proc. */
  memoryMb(): Promise<{ peak: number; current: number }>;
  /** CPU time (user + system) the operator process used so far, from /proc. */
  cpuSeconds(): Promise<number>;
  stop(): Promise<void>;
}

async function startOperatorProcess(identity: string): Promise<OperatorProcess> {
  const child = spawn(process.execPath, [CLI, 'operator', '--config', join(workDir, 'operator.yaml'), '--identity', identity, '--leader-election-namespace', 'default'], {
    env: { ...process.env, KUBECONFIG: join(workDir, 'kubeconfig') },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const output: string[] = [];
  const url = await new Promise<string>((resolve, reject) => {
    const lines = createInterface(child.stderr!);
    lines.on('line', (line) => {
      output.push(line);
      const address = /"address":"([^"]+)"/.exec(line)?.[1];
      if (address !== undefined && line.includes('operator listening')) resolve(address);
    });
    child.once('exit', (code) => reject(new Error(`the operator exited (${code}) before listening:\n${output.join('\n')}`)));
  });
  return {
    child,
    url,
    async memoryMb() {
      const status = await readFile(`/proc/${child.pid}/status`, 'utf8');
      const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1]);
      return { peak: Math.round(kb('VmHWM') / 1024), current: Math.round(kb('VmRSS') / 1024) };
    },
    async cpuSeconds() {
      // Fields 14 and 15 of /proc/<pid>/stat, after the parenthesised command name, in clock ticks (100 a second).
      const fields = (await readFile(`/proc/${child.pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
      return (Number(fields[11]) + Number(fields[12])) / 100;
    },
    async stop() {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

async function metric(url: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return text
    .split('\n')
    .filter((line) => line.startsWith(name))
    .reduce((sum, line) => sum + Number(line.split(' ').at(-1)), 0);
}

async function readyApps(): Promise<number> {
  const list = await cluster.api.list<App & KubeObject>('/apis/runlet.dev/v1alpha1/apps');
  return list.items.filter(isReadyAtGeneration).length;
}

/** Every App Ready at its generation and the operator's queue empty. */
async function steadyState(operator: OperatorProcess, minimumReconciles: number): Promise<void> {
  await waitFor(
    async () =>
      (await readyApps()) === APPS &&
      (await metric(operator.url, 'runlet_operator_queue_depth')) === 0 &&
      (await metric(operator.url, 'runlet_operator_reconciles_total')) >= minimumReconciles,
    { timeoutMs: 240_000, intervalMs: 500, what: `all ${APPS} Apps Ready and the queue empty` },
  );
}

async function inParallel<T>(items: T[], limit: number, run: (item: T) => Promise<unknown>): Promise<void> {
  const queue = [...items];
  await Promise.all(Array.from({ length: limit }, async () => {
    for (let item = queue.shift(); item !== undefined; item = queue.shift()) await run(item);
  }));
}

describe(`${APPS} Apps`, () => {
  it(`are reconciled within ${TARGET_SECONDS} s and ${TARGET_RSS_MB} MB, created live and again by a fresh operator`, async () => {
    const apps = Array.from({ length: APPS }, (_, i) => ({ namespace: `scale-${i % NAMESPACES}`, name: `app-${i}`, custom: i % 5 === 4 }));
    const first = await startOperatorProcess('scale-a');
    await waitFor(async () => (await metric(first.url, 'runlet_operator_leader')) === 1, { timeoutMs: 20_000, what: 'leadership' });

    const liveStart = performance.now();
    await inParallel(apps, 16, async ({ namespace, name, custom }) => {
      if (custom) {
        await cluster.api.create(paths.app(namespace), { apiVersion: 'runlet.dev/v1alpha1', kind: 'App', metadata: { name }, spec: { runtime: { custom: { image: 'ghcr.io/acme/web:1', port: 8080, healthcheckEndpoint: '/health' } } } } as KubeObject);
      } else {
        await createCodeConfigMap(cluster.api, namespace, `${name}-code`, name, { 'main.py': `def run():\n    return ${JSON.stringify(name)}\n` });
        await cluster.api.create(paths.app(namespace), { apiVersion: 'runlet.dev/v1alpha1', kind: 'App', metadata: { name }, spec: pythonSpec({}, `${name}-code`) } as KubeObject);
      }
    });
    await steadyState(first, APPS);
    const liveSeconds = (performance.now() - liveStart) / 1000;
    const liveMemory = await first.memoryMb();
    const liveCpu = await first.cpuSeconds();
    await first.stop();

    const restartStart = performance.now();
    const second = await startOperatorProcess('scale-b');
    await steadyState(second, APPS);
    const restartSeconds = (performance.now() - restartStart) / 1000;
    const restartMemory = await second.memoryMb();
    const restartCpu = await second.cpuSeconds();
    await second.stop();

    console.info(
      [
        `operator scale, ${APPS} Apps in ${NAMESPACES} namespaces (in-memory API server, operator in its own process):`,
        `  created live:  ${liveSeconds.toFixed(1)} s to steady state (operator CPU ${liveCpu.toFixed(1)} s), RSS peak ${liveMemory.peak} MB, now ${liveMemory.current} MB`,
        `  fresh process: ${restartSeconds.toFixed(1)} s to steady state (operator CPU ${restartCpu.toFixed(1)} s), RSS peak ${restartMemory.peak} MB, now ${restartMemory.current} MB`,
      ].join('\n'),
    );
    expect(liveCpu).toBeLessThanOrEqual(TARGET_SECONDS);
    expect(restartCpu).toBeLessThanOrEqual(TARGET_SECONDS);
    expect(Math.max(liveMemory.peak, restartMemory.peak)).toBeLessThanOrEqual(TARGET_RSS_MB);
  }, 600_000);
});
