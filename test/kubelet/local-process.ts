// One run of a container: a child process with its output copied into the pod's log, and a promise of
// how it ended. A program that cannot be started at all ends like one that exited with 127, as a shell
// reports a missing command.
import { spawn } from 'node:child_process';
import type { ContainerLaunch } from './launch.ts';
import type { LogFile } from './log-file.ts';

export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Why the program could not be started, if it could not. */
  spawnError?: Error;
}

export interface LocalProcess {
  readonly pid: number | undefined;
  readonly exited: Promise<ProcessExit>;
  alive(): boolean;
  /** Sends a signal if the process still runs. */
  signal(signal: NodeJS.Signals): void;
}

const COMMAND_NOT_FOUND = 127;

export function spawnLocal(container: string, launch: ContainerLaunch, log: LogFile): LocalProcess {
  const [program, ...args] = launch.argv;
  const child = spawn(program!, args, { cwd: launch.cwd, env: launch.env, stdio: ['ignore', 'pipe', 'pipe'] });
  log.attach(container, child.stdout, 'stdout');
  log.attach(container, child.stderr, 'stderr');
  let running = child.pid !== undefined;
  const exited = new Promise<ProcessExit>((resolve) => {
    child.once('exit', (code, signal) => {
      running = false;
      resolve({ code, signal });
    });
    child.once('error', (error) => {
      // Also emitted for a failed kill(); only a failed start ends the run here.
      if (child.pid !== undefined) return;
      running = false;
      resolve({ code: COMMAND_NOT_FOUND, signal: null, spawnError: error });
    });
  });
  return {
    pid: child.pid,
    exited,
    alive: () => running,
    signal: (signal) => {
      if (running) child.kill(signal);
    },
  };
}
