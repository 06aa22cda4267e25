// `runlet sidecar --run-store runlog` as a process against the in-memory API server: it records runs in its
// pod's RunLog without loading @kubernetes/client-node (~46 MB of RSS), except for a kubeconfig user whose
// credentials come from a plugin, which client-node runs.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { APP_NAME, NAMESPACE, POD_NAME, startCluster, type Cluster } from '../../sidecar/runs/runlog-test-kit.ts';
import { waitFor } from '../support/wait.ts';

const CLI = resolve(import.meta.dirname, '../../cli/runlet.ts');
const RECORD_MODULES = resolve(import.meta.dirname, '../support/record-modules.ts');
const CLIENT_NODE = /\/node_modules\/@kubernetes\/client-node\//;
/** What a sidecar without webhooks, auth or custom apps never needs (each is megabytes of RSS): loaded on use. */
const LOADED_ON_USE = /\/node_modules\/(undici|jose|fastify|@fastify\/swagger|pino-pretty|yaml)\//;

let dir: string | undefined;
let cluster: Cluster | undefined;
let sidecar: ChildProcess | undefined;

afterEach(async () => {
  if (sidecar !== undefined && sidecar.exitCode === null && sidecar.signalCode === null) {
    sidecar.kill('SIGKILL');
    await new Promise((resolveExit) => sidecar!.once('exit', resolveExit));
  }
  sidecar = undefined;
  await cluster?.server.close();
  cluster = undefined;
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

/**
 * Starts the sidecar with KUBECONFIG pointing at the API server (the kubeconfig changed by `edit`), waits until it
 * has created its RunLog, stops it, and returns the URLs of the modules it loaded.
 */
async function modulesOfSidecar(edit: (kubeconfig: KubeconfigDocument) => void = () => {}): Promise<string[]> {
  dir = mkdtempSync(join(tmpdir(), 'runlet-sidecar-runlog-'));
  cluster = await startCluster();
  const kubeconfig = join(dir, 'kubeconfig');
  await cluster.server.writeKubeconfig(kubeconfig);
  const document = parse(readFileSync(kubeconfig, 'utf8')) as KubeconfigDocument;
  edit(document);
  // Written as JSON (which is YAML): the sidecar then reads it without loading its YAML parser.
  writeFileSync(kubeconfig, JSON.stringify(document));
  const moduleLog = join(dir, 'modules.log');

  const child = spawn(
    process.execPath,
    [
      '--import', RECORD_MODULES, CLI, 'sidecar', '--project', NAMESPACE, '--app', APP_NAME, '--replica', POD_NAME, '--run-store', 'runlog',
      // No runtime is needed: the RunLog is written at startup, whether or not the app is ready.
      '--app-port', '9', '--port', '0', '--admin-port', '0', '--auth', 'off',
    ],
    { env: { ...process.env, KUBECONFIG: kubeconfig, RUNLET_TEST_MODULE_LOG: moduleLog }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  sidecar = child;
  let output = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const exited = new Promise<number | null>((resolveExit) => child.once('exit', resolveExit));

  const running = cluster;
  try {
    await waitFor(async () => child.exitCode === null && output.includes('sidecar listening') && (await running.readRunLog()) !== undefined, {
      what: 'the sidecar to listen and create its RunLog',
    });
  } catch (error) {
    throw new Error(`${(error as Error).message}; the sidecar's output:\n${output}`, { cause: error });
  }
  child.kill('SIGTERM');
  // Bounded by the test's timeout; the store's close is bounded by its own.
  expect(await exited, output).toBe(0);
  return readFileSync(moduleLog, 'utf8').split('\n').filter(Boolean);
}

interface KubeconfigDocument {
  users: { name: string; user: Record<string, unknown> }[];
}

describe('runlet sidecar --run-store runlog', () => {
  it('writes its RunLog without loading @kubernetes/client-node, nor undici, jose, fastify, pino-pretty or the YAML parser', async () => {
    const modules = await modulesOfSidecar();
    // The list is of this run's modules: it holds the credentials path the RunLog was written with.
    expect(modules.some((url) => url.endsWith('/sidecar/runs/kube-credentials-kubeconfig.ts'))).toBe(true);
    expect(modules.filter((url) => CLIENT_NODE.test(url))).toEqual([]);
    expect(modules.filter((url) => LOADED_ON_USE.test(url))).toEqual([]);
  });

  it('loads client-node for a kubeconfig user with an exec plugin, and still writes its RunLog', async () => {
    const credential = { apiVersion: 'client.authentication.k8s.io/v1beta1', kind: 'ExecCredential', status: { token: 'from-plugin' } };
    const modules = await modulesOfSidecar((kubeconfig) => {
      kubeconfig.users[0]!.user = {
        exec: {
          apiVersion: 'client.authentication.k8s.io/v1beta1',
          command: process.execPath,
          args: ['-e', `process.stdout.write(${JSON.stringify(JSON.stringify(credential))})`],
        },
      };
    });
    expect(modules.some((url) => CLIENT_NODE.test(url))).toBe(true);
  });
});
