// README.md's "On Kubernetes" followed step by step on the real control plane (test/control-plane: kube-apiserver
// 1.20, controller manager, scheduler) with the test kubelet as its Node: the commands are read from the
// section's `sh` blocks (readme-walkthrough.ts, which also says how each differs on this tier) and typed into one
// bash, as a person would, with `kubectl` the 1.20 client and `runlet` this checkout's CLI. install.yaml's
// operator runs as its two pods (leader election, its ServiceAccount and ClusterRole); the app's pod runs the
// sidecar and the Python runtime. Between commands the test waits only where a person would be slower than a
// script: for the CRDs to be served, and for the runs to reach the management API.
import { execFile } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, describe, expect, it } from 'vitest';
import { controlPlaneSkipReason, startControlPlane, type ControlPlane } from '../control-plane/control-plane.ts';
import { localImages, startControlPlaneKubelet } from '../control-plane/process-kubelet.ts';
import { sidecarUrls, type Kubelet } from '../kubelet/index.ts';
import { ShellSession, type CommandResult } from '../support/shell-session.ts';
import { waitFor } from '../support/wait.ts';
import { REPO } from './e2e-cluster.ts';
import { ADAPTATIONS, readmeWalkthrough, tierNotes, tokenRequestCommand, type ReadmeCommand } from './readme-walkthrough.ts';

const COMMAND_TIMEOUT_MS = 60_000;
/** `runlet deploy` waits until the App is Ready (300 s, then it says why not): two operator pods and the app's pod start first. */
const DEPLOY_TIMEOUT_MS = 330_000;
const WALKTHROUGH_TIMEOUT_MS = 900_000;

const run = promisify(execFile);

/** What the test does around a README command: before it runs, and what its result must show. */
interface Step {
  /** The README command starts with this. */
  readonly readme: string;
  before?(): Promise<void>;
  check?(result: CommandResult): void | Promise<void>;
  readonly timeoutMs?: number;
}

const skipReason = controlPlaneSkipReason();
if (skipReason !== undefined) console.log(`README "On Kubernetes" on a real control plane: skipped, ${skipReason}`);

describe.skipIf(skipReason !== undefined)('README "On Kubernetes" on a real control plane', () => {
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
    const controlPlane: ControlPlane = await startControlPlane();
    closers.push(() => controlPlane.stop());
    const admin = new KubeConfig();
    admin.loadFromFile(controlPlane.kubeconfigPath);
    const kubelet: Kubelet = await startControlPlaneKubelet({
      kubeConfig: admin,
      server: controlPlane.server,
      workDir: join(workDir, 'kubelet'),
      images: localImages(controlPlane.server),
    });
    closers.push(() => kubelet.stop());

    // `kubectl` of the server's version and `runlet` of this checkout, first on PATH.
    const bin = join(workDir, 'bin');
    await run('mkdir', [bin]);
    await symlink(controlPlane.kubectl, join(bin, 'kubectl'));
    await writeFile(join(bin, 'runlet'), `#!/bin/sh\nexec '${process.execPath}' '${join(REPO, 'cli/runlet.ts')}' "$@"\n`);
    await chmod(join(bin, 'runlet'), 0o755);
    const shell = new ShellSession({
      cwd: REPO,
      env: { PATH: `${bin}:${process.env.PATH}`, HOME: process.env.HOME, TMPDIR: process.env.TMPDIR, KUBECONFIG: controlPlane.kubeconfigPath },
    });
    closers.push(() => shell.close());
    const diagnostics = () => [kubelet.diagnostics(), controlPlane.diagnostics()].join('\n');
    const shellValue = async (name: string) => (await shell.run(`printf %s "$${name}"`, COMMAND_TIMEOUT_MS)).stdout;

    /** Where the README's hosts are on this tier (see ADAPTATIONS): known once the pods run. */
    const exportPodAddresses = async () => {
      const [appPod] = kubelet.pods({ namespace: 'demo', labels: { 'app.kubernetes.io/name': 'hello' } });
      if (appPod === undefined) throw new Error(`no pod of demo/hello runs in the test kubelet; it runs: ${kubelet.pods().map((p) => `${p.namespace}/${p.name}`).join(', ')}`);
      const managementApi = await waitFor(
        async () => {
          // The operator's pods: the activator's share the namespace, and serve no management API.
          for (const pod of kubelet.pods({ namespace: 'runlet-system', labels: { 'app.kubernetes.io/component': 'operator' } })) {
            const url = pod.url(8080);
            if ((await fetch(`${url}/ready`).catch(() => undefined))?.ok) return url;
          }
          return undefined;
        },
        { what: 'an operator pod ready to serve the management API', timeoutMs: COMMAND_TIMEOUT_MS, intervalMs: 250 },
      );
      await shell.run(`APP_URL=${sidecarUrls(appPod).runUrl} MANAGEMENT_API_URL=${managementApi}`, COMMAND_TIMEOUT_MS);
    };

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
          await exportPodAddresses();
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
        readme: 'runlet runs hello --project demo',
        // The sidecar writes its RunLog about once a second, and the grant takes a moment to reach the
        // authorizer (a refusal is cached 5 s): wait until the management API lists all three runs.
        before: async () => {
          const [api, token] = [await shellValue('RUNLET_API_URL'), await shellValue('RUNLET_TOKEN')];
          await waitFor(
            async () => {
              const page = await fetch(`${api}/v2/projects/demo/apps/hello/runs`, { headers: { authorization: `Bearer ${token}` } });
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
      await step?.check?.(result);
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
