// A custom-runtime app folder made for one test: the fixture server on a free port.
import { copyFile, mkdtemp, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FIXTURE_APPS } from './dev-server.ts';

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** `extraToml`: more of service.toml, such as `[scaling]` or `[deployment.env]` tables. */
export async function makeCustomApp(name: string, extraToml = ''): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `runlet-custom-${name}-`));
  await copyFile(join(FIXTURE_APPS, 'custom/server.mjs'), join(dir, 'server.mjs'));
  const port = await freePort();
  await writeFile(
    join(dir, 'service.toml'),
    `[deployment]\nname = "${name}"\n\n[runtime.custom]\nentrypoint = ["node", "server.mjs"]\nport = ${port}\nreadycheck_endpoint = "/ready"\n\n${extraToml}\n`,
  );
  return dir;
}
