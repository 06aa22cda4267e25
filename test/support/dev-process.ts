// `runlet dev` as a real child process, for what only a process can show: signals, exit codes, crashes.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { resolve } from 'node:path';
import { afterEach } from 'vitest';

const CLI = resolve(import.meta.dirname, '../../cli/runlet.ts');

export interface DevProcess {
  url: string;
  child: ChildProcess;
  output: () => string;
  /** Resolves with the exit code (null when killed by a signal). */
  exited: Promise<number | null>;
}

/** `env`: added to this process's (an undefined value removes a variable). */
export async function spawnDev(appDirs: string[], dataDir: string, extraArgs: string[] = [], env: Record<string, string | undefined> = {}): Promise<DevProcess> {
  const child = spawn(process.execPath, [CLI, 'dev', ...appDirs, '--port', '0', '--data-dir', dataDir, ...extraArgs], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, RUNLET_LOG_LEVEL: 'warn', ...env },
  });
  let output = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const exited = once(child, 'exit').then(([code]) => code as number | null);
  const url = await new Promise<string>((resolveUrl, reject) => {
    const onData = (): void => {
      const match = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
      // The banner ends with the hints, printed once every runtime is ready.
      if (match && output.includes('Try:')) {
        child.stdout!.off('data', onData);
        resolveUrl(match[1]!);
      }
    };
    child.stdout!.on('data', onData);
    void exited.then((code) => reject(new Error(`runlet dev exited (${code}) before it was ready:\n${output}`)));
  });
  return { url, child, output: () => output, exited };
}

export interface DevProcessesPerTest {
  /** Spawns `runlet dev` on the app folders with this data dir; it is killed (if still running) after the test. */
  start(dataDir: string): Promise<DevProcess>;
  /** Another clean-up step for after the test; steps run last first. */
  defer(step: () => Promise<unknown>): void;
}

/** For the tests of a file that start `runlet dev` processes and must leave none behind. */
export function devProcessesPerTest(appDirs: string[]): DevProcessesPerTest {
  const cleanup: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const step of cleanup.splice(0).reverse()) await step();
  });
  return {
    async start(dataDir) {
      const dev = await spawnDev(appDirs, dataDir);
      cleanup.push(async () => {
        if (dev.child.exitCode === null) dev.child.kill('SIGKILL');
        await dev.exited;
      });
      return dev;
    },
    defer(step) {
      cleanup.push(step);
    },
  };
}
