// `runlet operator` (or another daemon command: `runlet activator`) as a real process, as its tests start it:
// no kubeconfig to find (KUBECONFIG empty, HOME a folder of the test's), its output collected, and killed at the
// end of the test if it still runs.
import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';

const CLI = resolve(import.meta.dirname, '../../cli/runlet.ts');
/** What every test passes: images, a loopback port for health and metrics, the Lease in `default`. */
export const OPERATOR_TEST_ARGS = ['--sidecar-image', 'runlet/runlet:test', '--python-runtime-image', 'runlet/python-runtime:test', '--host', '127.0.0.1', '--port', '0', '--results-collector-port', '0', '--metrics-port', '0', '--leader-election-namespace', 'default'];

export interface OperatorProcess {
  readonly child: ChildProcess;
  /** stdout and stderr so far. */
  output(): string;
  /** Resolves with the exit code. */
  readonly exited: Promise<number | null>;
  /** SIGKILL unless it has exited; resolves once it has. */
  kill(): Promise<void>;
}

export function startOperatorProcess(options: { home: string; env: Record<string, string>; args?: string[] }): OperatorProcess {
  return startRunletProcess('operator', { ...options, args: [...OPERATOR_TEST_ARGS, ...(options.args ?? [])] });
}

/** `runlet <command> ARGS` as a real process (`startOperatorProcess` adds the operator's test arguments). */
export function startRunletProcess(command: string, options: { home: string; env: Record<string, string>; args?: string[] }): OperatorProcess {
  const child = spawn(process.execPath, [CLI, command, ...(options.args ?? [])], {
    env: { ...process.env, KUBECONFIG: '', HOME: options.home, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const exited = new Promise<number | null>((resolveExit) => child.once('exit', resolveExit));
  return {
    child,
    output: () => output,
    exited,
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}
