// Starts `runlet dev`'s server in the test process (the runtimes are real processes) on an ephemeral port,
// with its own data directory.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import pino from 'pino';
import { startDevServer, type DevServer, type DevServerOptions } from '../../local/dev-server.ts';

export const FIXTURE_APPS = resolve(import.meta.dirname, '../fixtures/apps');

export interface TestDevServer extends DevServer {
  dataDir: string;
  /** Closes the server and removes its data directory. */
  dispose(): Promise<void>;
}

export async function startTestDevServer(
  options: Partial<DevServerOptions> & { appDirs: string[]; dataDir?: string },
): Promise<TestDevServer> {
  const dataDir = options.dataDir ?? (await mkdtemp(join(tmpdir(), 'runlet-test-data-')));
  const server = await startDevServer({
    port: 0,
    projectId: 'dev',
    logger: pino({ level: process.env.RUNLET_TEST_LOG_LEVEL ?? 'silent' }),
    ...options,
    dataDir,
  });
  if (!(await server.ready(30_000))) {
    await server.close();
    throw new Error(`runtimes of ${options.appDirs.join(', ')} did not become ready`);
  }
  return Object.assign(server, {
    dataDir,
    async dispose() {
      await server.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  });
}

export async function postJson(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
}
