// A fixture app's Python runtime as an app container runs it, for tests that put a real `runlet sidecar` in front.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { resolve } from 'node:path';
import { waitFor } from './wait.ts';

const PYTHON_RUNTIME = resolve(import.meta.dirname, '../../runtime/python');

export interface PythonRuntimeOptions {
  appDir: string;
  port: number;
  /** Where the runtime writes its port once it listens. */
  portFile: string;
  concurrency: number;
}

/** Starts the runtime; `spawned` gets the process at once (to be stopped by the test); resolves once it listens. */
export async function startPythonRuntime(options: PythonRuntimeOptions, spawned: (child: ChildProcess) => void): Promise<ChildProcess> {
  rmSync(options.portFile, { force: true });
  const runtime = spawn(
    process.env.RUNLET_PYTHON ?? 'python3',
    ['-m', 'runlet_runtime', '--app-dir', options.appDir, '--port', String(options.port), '--port-file', options.portFile, '--concurrency', String(options.concurrency)],
    { cwd: PYTHON_RUNTIME, env: { ...process.env, PYTHONPATH: PYTHON_RUNTIME }, stdio: 'ignore' },
  );
  spawned(runtime);
  await waitFor(() => runtime.exitCode === null && portFileWritten(options.portFile), { what: 'the runtime to listen' });
  return runtime;
}

/** The runtime writes its port file (atomically) once it listens. */
function portFileWritten(path: string): boolean {
  try {
    return Number(readFileSync(path, 'utf8')) > 0;
  } catch {
    return false;
  }
}
