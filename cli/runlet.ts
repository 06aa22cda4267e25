// `runlet`: one entry point, one module per command.
import { CliError } from './cli-error.ts';

interface Command {
  usage: string;
  run: (args: string[]) => Promise<number>;
}

/**
 * Commands load their module only when chosen: `runlet runs` should not pay for the operator's Kubernetes
 * client or the sidecar's server at start-up.
 */
const COMMANDS: Record<string, { summary: string; load: () => Promise<Command> }> = {
  dev: {
    summary: 'Run apps locally: run interface, runtime and runs API on one port',
    load: async () => import('./dev-command.ts').then((m) => ({ usage: m.DEV_USAGE, run: m.runDevCommand })),
  },
  runs: {
    summary: 'List the runs of an app (runlet dev or a cluster)',
    load: async () => import('./runs-command.ts').then((m) => ({ usage: m.RUNS_USAGE, run: m.runRunsCommand })),
  },
  manifest: {
    summary: 'Print the App (and code ConfigMap) YAML of an app folder',
    load: async () => import('./manifest-command.ts').then((m) => ({ usage: m.MANIFEST_USAGE, run: m.runManifestCommand })),
  },
  deploy: {
    summary: 'Apply an app folder to the current kube context and wait until it is ready (serving, rolled out)',
    load: async () => import('./deploy-command.ts').then((m) => ({ usage: m.DEPLOY_USAGE, run: m.runDeployCommand })),
  },
  dockerfile: {
    summary: "Write a Dockerfile that bakes an app's code into the runtime image",
    load: async () => import('./dockerfile-command.ts').then((m) => ({ usage: m.DOCKERFILE_USAGE, run: m.runDockerfileCommand })),
  },
  sidecar: {
    summary: "Serve the run interface in front of one app's runtime (the pod sidecar)",
    load: async () => import('./sidecar-command.ts').then((m) => ({ usage: m.SIDECAR_USAGE, run: m.runSidecarCommand })),
  },
  operator: {
    summary: 'Reconcile App resources into Deployments, Services and Ingresses (in a cluster)',
    load: async () => import('./operator-command.ts').then((m) => ({ usage: m.OPERATOR_USAGE, run: m.runOperatorCommand })),
  },
  namespace: {
    summary: 'Enrol a namespace as an App namespace, where Runlet may write (a cluster admin\'s command)',
    load: async () => import('./namespace-command.ts').then((m) => ({ usage: m.NAMESPACE_USAGE, run: m.runNamespaceCommand })),
  },
  activator: {
    summary: 'Hold the calls to Apps at zero replicas until a pod is ready (in a cluster)',
    load: async () => import('./activator-command.ts').then((m) => ({ usage: m.ACTIVATOR_USAGE, run: m.runActivatorCommand })),
  },
};

const USAGE = `Usage: runlet <command> [options]

Commands:
${Object.entries(COMMANDS)
  .map(([name, command]) => `  ${name.padEnd(10)} ${command.summary}`)
  .join('\n')}

Run "runlet <command> --help" for a command's options.`;

async function main(argv: string[]): Promise<number> {
  const [name, ...args] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    const topic = name === 'help' ? args[0] : undefined;
    const command = topic === undefined ? undefined : await COMMANDS[topic]?.load();
    process.stdout.write((command?.usage ?? USAGE) + '\n');
    return name === undefined ? 2 : 0;
  }
  const entry = COMMANDS[name];
  if (!entry) {
    process.stderr.write(`runlet: unknown command "${name}"\n\n${USAGE}\n`);
    return 2;
  }
  const command = await entry.load();
  if (args.includes('--help') || args.includes('-h')) {
    process.stdout.write(command.usage + '\n');
    return 0;
  }
  return command.run(args);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`runlet: ${err instanceof CliError ? err.message : (err as Error).stack ?? String(err)}\n`);
    process.exitCode = err instanceof CliError ? err.exitCode : 1;
  },
);
