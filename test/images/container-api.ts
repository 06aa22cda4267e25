// The Docker-compatible API the `testcontainers` package drives: Docker's own socket where a daemon runs, else
// podman's (`podman system service`, started here on a socket of this test's own and stopped after it).
// testcontainers' reaper (Ryuk) is turned off: it is a container pulled from Docker Hub, which these machines
// cannot reach; each test stops what it started instead.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { waitFor } from '../support/wait.ts';
import type { Engine } from './images.ts';

const podmanConfigFile = fileURLToPath(new URL('../../images/podman-containers.conf', import.meta.url));

export interface ContainerApi {
  stop(): Promise<void>;
}

/** Points testcontainers at the engine's API; call before the first container of the test file. */
export async function startContainerApi(engine: Engine): Promise<ContainerApi> {
  process.env.TESTCONTAINERS_RYUK_DISABLED = 'true';
  if (engine === 'docker') return { stop: async () => {} };
  const dir = await mkdtemp(join(tmpdir(), 'runlet-podman-api-'));
  const socket = join(dir, 'podman.sock');
  // --time=0: no idle timeout, the service lives until this test stops it.
  // The repo's podman configuration, as images/images.sh gives it (the file says why), unless one is set.
  const env = { ...process.env, CONTAINERS_CONF: process.env.CONTAINERS_CONF ?? podmanConfigFile };
  const service = spawn('podman', ['system', 'service', '--time=0', `unix://${socket}`], { stdio: ['ignore', 'ignore', 'pipe'], env });
  let stderr = '';
  service.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  try {
    await waitFor(async () => service.exitCode === null && (await ping(socket)), { what: `podman system service on ${socket}`, timeoutMs: 30_000, intervalMs: 50 });
  } catch (error) {
    await stopService(service);
    throw new Error(`podman system service did not answer: ${stderr}`, { cause: error });
  }
  process.env.DOCKER_HOST = `unix://${socket}`;
  return {
    async stop() {
      await stopService(service);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

function ping(socketPath: string): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request({ socketPath, path: '/_ping' }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('error', () => resolve(false));
    req.end();
  });
}

async function stopService(service: ChildProcess): Promise<void> {
  if (service.exitCode !== null || service.signalCode !== null) return;
  const exited = once(service, 'exit');
  service.kill('SIGTERM');
  await exited;
}
