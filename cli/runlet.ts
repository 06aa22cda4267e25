// `runlet`: one entry point, one module per command.
import { runDevCommand, DEV_USAGE } from './dev-command.ts';
import { runSidecarCommand, SIDECAR_USAGE } from './sidecar-command.ts';
import { CliError } from './cli-error.ts';

const COMMANDS: Record<string, { summary: string; usage: string; run: (args: string[]) => Promise<number> }> = {
  dev: { summary: 'Run apps locally: run interface, runtime and runs API on one port', usage: DEV_USAGE, run: runDevCommand },
  sidecar: { summary: "Serve the run interface in front of one app's runtime (the pod sidecar)", usage: SIDECAR_USAGE, run: runSidecarCommand },
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
    const command = topic === undefined ? undefined : COMMANDS[topic];
    process.stdout.write((command?.usage ?? USAGE) + '\n');
    return name === undefined ? 2 : 0;
  }
  const command = COMMANDS[name];
  if (!command) {
    process.stderr.write(`runlet: unknown command "${name}"\n\n${USAGE}\n`);
    return 2;
  }
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
