// An app folder for one test: the e2e fixture's code with a service.toml the test chooses.
import { copyFile, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FIXTURE_APPS } from './dev-server.ts';

export async function makePythonApp(name: string, serviceToml: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `runlet-app-${name}-`));
  await copyFile(join(FIXTURE_APPS, 'e2e/main.py'), join(dir, 'main.py'));
  await writeFile(join(dir, 'service.toml'), `[deployment]\nname = "${name}"\n\n${serviceToml}\n`);
  return dir;
}
