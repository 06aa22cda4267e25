// README.md's "On Kubernetes" followed step by step on the real control plane (test/control-plane: kube-apiserver
// 1.20, controller manager, scheduler) with a real Node (node.sh: kubelet, kube-proxy, containerd and runc, the
// images `make images` built, cluster DNS): the commands are read from the section's `sh` blocks
// (readme-walkthrough.ts, which also says how each differs on this tier) and typed into one bash, as a person
// would, with `kubectl` the 1.20 client and `runlet` this checkout's CLI. install.yaml's operator and
// activator run as their pods, from the image; the app's pod runs the sidecar and the Python runtime images,
// verifying callers' tokens (auth on, the default). Pods and Services have addresses only inside the Node's
// network namespace: `curl` and `runlet` run there (nsenter), and reach the App's and the operator's Services
// at their cluster IPs, as an ingress would; `kubectl logs` reaches the kubelet through the API server. Between
// commands the test waits only where a person would be slower than a script: for the CRDs to be served, and
// for the runs to reach the management API and the sidecar's log.
import { execFile } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { existsSync } from 'node:fs';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { afterAll, describe, expect, it } from 'vitest';
import { startControlPlane, type ControlPlane } from '../control-plane/control-plane.ts';
import { REAL_NODE_CONTROL_PLANE, realNodeSkipReason, startRealNode, type RealNode } from '../control-plane/node.ts';
import { postgresVolume } from '../control-plane/postgres-volume.ts';
import { ShellSession, type CommandResult } from '../support/shell-session.ts';
import { waitFor } from '../support/wait.ts';
import { REPO } from './e2e-cluster.ts';
import { ADAPTATIONS, readmeWalkthrough, tierNotes, tokenRequestCommand, type ReadmeCommand } from './readme-walkthrough.ts';

const COMMAND_TIMEOUT_MS = 60_000;
/** `runlet deploy` waits until the App is Ready (300 s, then it says why not): the operator's and activator's pods and the app's start first. */
const DEPLOY_TIMEOUT_MS = 330_000;
const WALKTHROUGH_TIMEOUT_MS = 900_000;
const UNINSTALL_TIMEOUT_MS = 180_000;

const run = promisify(execFile);

/** What the test does around a README command: before it runs, and what its result must show. */
interface Step {
  /** The README command starts with this. */
  readonly readme: string;
  before?(): Promise<void>;
  check?(result: CommandResult): void | Promise<void>;
  readonly timeoutMs?: number;
}

const skipReason = realNodeSkipReason();
if (skipReason !== undefined) console.log(`README "On Kubernetes" on a real control plane and Node: skipped, ${skipReason}`);

/** A tool of the machine's PATH, by its full path (the shell's PATH puts wrappers of the same name first). */
function onPath(tool: string): string {
  const found = (process.env.PATH ?? '').split(':').map((dir) => join(dir, tool)).find((path) => existsSync(path));
  if (found === undefined) throw new Error(`${tool} is not on PATH`);
  return found;
}

describe.skipIf(skipReason !== undefined)('README "On Kubernetes" on a real control plane and Node', () => {
  const closers: (() => Promise<unknown>)[] = [];
  afterAll(async () => {
    for (const close of closers.reverse()) await close();
  }, 120_000);

  it('runs every command of the section (adapted where the tier differs) and each does what the README says', async () => {
    const markdown = await readFile(join(REPO, 'README.md'), 'utf8');
    const commands = readmeWalkthrough(markdown);
    const notes = tierNotes(markdown);
    expect(notes, 'the README tells a person the install.yaml command the test runs').toContain('npm run -s kube-1.20 -- install.yaml | kubectl apply -f -');
    expect(notes, 'the README shows the TokenRequest form the test runs').toContain(tokenRequestCommand('caller', 'demo', 'runlet', '1h'));

    const workDir = await mkdtemp(join(tmpdir(), 'runlet-readme-walkthrough-'));
    closers.push(() => rm(workDir, { recursive: true, force: true }));
    const controlPlane: ControlPlane = await startControlPlane(REAL_NODE_CONTROL_PLANE);
    closers.push(() => controlPlane.stop());
    const node: RealNode = await startRealNode(controlPlane);
    closers.push(() => node.stop());
    const admin = new KubeConfig();
    admin.loadFromFile(controlPlane.kubeconfigPath);
    const core = admin.makeApiClient(CoreV1Api);
    // The tier has no volume provisioner: the embedded PostgreSQL's claim gets its PersistentVolume first, as a
    // cluster's default StorageClass would give it one (the README asks nothing of the reader for it).
    const volume = join(workDir, 'postgres-volume.json');
    await writeFile(volume, JSON.stringify(await postgresVolume(controlPlane.dir)));
    await run(controlPlane.kubectl, ['--kubeconfig', controlPlane.kubeconfigPath, 'apply', '-f', volume]);

    // `kubectl` of the server's version, `runlet` of this checkout and `curl`, first on PATH: runlet and curl
    // inside the Node's network namespace, where the Services are (and the API server, relayed at the same
    // loopback address as outside).
    const bin = join(workDir, 'bin');
    await run('mkdir', [bin]);
    await symlink(controlPlane.kubectl, join(bin, 'kubectl'));
    const inNode = `nsenter --net='${node.netnsPath}'`;
    await writeFile(join(bin, 'runlet'), `#!/bin/sh\nexec ${inNode} '${process.execPath}' '${join(REPO, 'cli/runlet.ts')}' "$@"\n`);
    await writeFile(join(bin, 'curl'), `#!/bin/sh\nexec ${inNode} '${onPath('curl')}' "$@"\n`);
    await chmod(join(bin, 'runlet'), 0o755);
    await chmod(join(bin, 'curl'), 0o755);
    const shell = new ShellSession({
      cwd: REPO,
      env: { PATH: `${bin}:${process.env.PATH}`, HOME: process.env.HOME, TMPDIR: process.env.TMPDIR, KUBECONFIG: controlPlane.kubeconfigPath },
    });
    closers.push(() => shell.close());
    const diagnostics = () => [node.diagnostics(), controlPlane.diagnostics()].join('\n');
    /** The pods and ReplicaSets as kubectl shows them, for a failing step. */
    const workloads = () =>
      run(controlPlane.kubectl, ['--kubeconfig', controlPlane.kubeconfigPath, 'get', 'pods,replicasets', '-A', '-o', 'wide']).then(
        ({ stdout }) => stdout,
        (error: unknown) => `(kubectl get pods failed: ${(error as Error).message})`,
      );
    const shellValue = async (name: string) => (await shell.run(`printf %s "$${name}"`, COMMAND_TIMEOUT_MS)).stdout;

    /** Where the README's hosts are on this tier (see ADAPTATIONS): the Services' cluster IPs, once they exist. */
    const exportServiceAddresses = async () => {
      const clusterIp = async (namespace: string, name: string) => (await core.readNamespacedService({ namespace, name })).spec!.clusterIP!;
      const [app, managementApi] = [await clusterIp('demo', 'hello'), await clusterIp('runlet-system', 'runlet-operator')];
      await shell.run(`APP_URL=http://${app} MANAGEMENT_API_URL=http://${managementApi}`, COMMAND_TIMEOUT_MS);
    };
    const sidecarLog = () => run(controlPlane.kubectl, ['--kubeconfig', controlPlane.kubeconfigPath, 'logs', '-n', 'demo', 'deployment/hello', '-c', 'sidecar']).then(({ stdout }) => stdout);

    const runIds: { sync?: string; async?: string } = {};
    const steps: Step[] = [
      {
        readme: 'kubectl apply -f install.yaml',
        check: (result) => expect(result.stdout).toContain('deployment.apps/runlet-operator created'),
      },
      {
        readme: 'runlet deploy examples/hello',
        // Typed by a person, the commands leave the API server the moment it takes to serve new CRDs.
        before: async () => {
          await run(controlPlane.kubectl, ['--kubeconfig', controlPlane.kubeconfigPath, 'wait', '--for', 'condition=Established', '--timeout', '60s', 'crd/apps.runlet.dev']);
        },
        check: async (result) => {
          expect(result.stdout).toContain('hello is ready at ');
          await exportServiceAddresses();
        },
        timeoutMs: DEPLOY_TIMEOUT_MS,
      },
      { readme: 'runlet manifest examples/hello', check: (result) => expect(result.stdout).toContain('kind: App') },
      {
        readme: 'curl -X POST https://runlet.example.com/v4/demo/hello/run -H',
        check: (result) => {
          const answer = JSON.parse(result.stdout) as { run_id: string; result: { greeting: string } };
          expect(answer.result.greeting).toBe('Hello, Ada!');
          runIds.sync = answer.run_id;
        },
      },
      { readme: 'curl -N -X POST https://runlet.example.com/v4/demo/hello/count', check: (result) => expect(result.stdout).toContain('data: {"item":5,"of":5}') },
      {
        readme: 'curl -X POST "https://runlet.example.com/v4/demo/hello/run?async=true',
        check: (result) => {
          runIds.async = (JSON.parse(result.stdout) as { run_id: string }).run_id;
          expect(runIds.async).toMatch(/^[0-9a-f-]{36}$/);
        },
      },
      {
        readme: 'kubectl logs -n demo deployment/hello -c sidecar',
        // The sidecar logs a run once it ends: the async one may end after this command.
        before: async () => {
          await waitFor(async () => (await sidecarLog()).includes(runIds.async!), { what: 'the async run in the sidecar’s log', timeoutMs: COMMAND_TIMEOUT_MS, intervalMs: 500 });
        },
        check: (result) => {
          const runs = result.stdout.split('\n').filter((line) => line.includes('"msg":"run"')).map((line) => JSON.parse(line) as { runId: string; mode: string; status: string });
          expect(runs.map(({ runId, mode, status }) => ({ runId, mode, status }))).toEqual(
            expect.arrayContaining([
              { runId: runIds.sync, mode: 'sync', status: 'success' },
              expect.objectContaining({ mode: 'stream', status: 'success' }),
              { runId: runIds.async, mode: 'async', status: 'success' },
            ]),
          );
        },
      },
      {
        readme: 'runlet runs hello --project demo',
        // The sidecar writes its RunLog about once a second, and the grant takes a moment to reach the
        // authorizer (a refusal is cached 5 s): wait until the management API lists all three runs.
        before: async () => {
          const [api, token] = [await shellValue('RUNLET_API_URL'), await shellValue('RUNLET_TOKEN')];
          await waitFor(
            async () => {
              const page = await node.fetchInside(`${api}/v2/projects/demo/apps/hello/runs`, { headers: { authorization: `Bearer ${token}` } });
              return page.ok && ((await page.json()) as { items: unknown[] }).items.length >= 3;
            },
            { what: 'the three runs listed by the management API', timeoutMs: COMMAND_TIMEOUT_MS, intervalMs: 500 },
          );
        },
        check: (result) => {
          if (result.stdout.trimStart().startsWith('[')) {
            const runs = JSON.parse(result.stdout) as { status: string }[];
            expect(runs.every((record) => record.status === 'failure'), result.stdout).toBe(true);
            return;
          }
          expect(result.stdout).toContain(runIds.sync!);
          expect(result.stdout).toContain(runIds.async!);
          expect(result.stdout).toMatch(/ count +stream +success /);
        },
      },
      { readme: 'kubectl delete apps --all -A', check: (result) => expect(result.stdout).toContain('app.runlet.dev "hello" deleted') },
      {
        readme: 'kubectl delete -f install.yaml',
        check: (result) => expect(result.stdout).toContain('customresourcedefinition.apiextensions.k8s.io "apps.runlet.dev" deleted'),
        // kubectl waits for the namespace to go: on a real kubelet, for its pods' shutdown first (their grace
        // period is 30 s), then for the namespace controller.
        timeoutMs: UNINSTALL_TIMEOUT_MS,
      },
    ];

    const used = new Set<Step>();
    const ran: ReadmeCommand[] = [];
    for (const command of commands) {
      if (command.tier === undefined) continue;
      const step = steps.find((candidate) => command.readme.startsWith(candidate.readme));
      // Only the first `runlet runs` waits; the next one reads what it read.
      if (step !== undefined && !used.has(step)) await step.before?.();
      const where = `README "${command.section}": \`${command.readme}\` (run as \`${command.tier}\`)`;
      const result = await shell.run(command.tier, step?.timeoutMs ?? COMMAND_TIMEOUT_MS).catch((error: unknown) => {
        throw new Error(`${where}: ${(error as Error).message}\n${diagnostics()}`, { cause: error });
      });
      if (result.status !== 0) throw new Error(`${where} exited ${result.status}\nstdout: ${result.stdout}\nstderr: ${result.stderr}\n${diagnostics()}`);
      await (async () => step?.check?.(result))().catch(async (error: unknown) => {
        throw new Error(`${where}: ${(error as Error).message}\nstdout: ${result.stdout}\nstderr: ${result.stderr}\n${await workloads()}\n${diagnostics()}`, { cause: error });
      });
      if (step !== undefined) used.add(step);
      ran.push(command);
    }
    expect(steps.filter((step) => !used.has(step)).map((step) => step.readme), 'steps whose README command is gone').toEqual([]);
    const skipped = commands.filter((command) => command.tier === undefined).map((command) => command.readme);
    expect(skipped, `skipped: ${ADAPTATIONS.filter((a) => a.replacement === null).map((a) => a.why).join('; ')}`).toEqual([
      'make images',
      expect.stringMatching(/^helm install runlet /),
      expect.stringMatching(/^helm uninstall runlet /),
    ]);
    expect(ran.length).toBe(commands.length - skipped.length);
  }, WALKTHROUGH_TIMEOUT_MS);
});
