// What runlet dev installs for an app: [dependencies.pip] as parsed from service.toml, else requirements.txt.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadAppDir } from '../crds/service-toml.ts';
import { appRequirements } from './app-requirements.ts';

const dirs: string[] = [];
afterEach(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

async function app(files: Record<string, string>) {
  const dir = await mkdtemp(join(tmpdir(), 'runlet-requirements-'));
  dirs.push(dir);
  const withName = { ...files, 'service.toml': `[deployment]\nname = "app"\n${files['service.toml'] ?? ''}` };
  for (const [name, text] of Object.entries(withName)) await writeFile(join(dir, name), text);
  return loadAppDir(dir);
}

describe('appRequirements', () => {
  it('is nothing for an app without [dependencies.pip] or requirements.txt, or with empty ones', async () => {
    expect(await appRequirements(await app({ 'main.py': '' }))).toBeNull();
    expect(await appRequirements(await app({ 'service.toml': '[dependencies.pip]\npackages = []\n' }))).toBeNull();
    expect(await appRequirements(await app({ 'requirements.txt': '# nothing yet\n\n' }))).toBeNull();
  });

  it('passes [dependencies.pip] after --, so that no specifier is taken for an option of pip', async () => {
    const requirements = await appRequirements(await app({ 'service.toml': '[dependencies.pip]\npackages = ["numpy>=2", "--index-url=http://elsewhere/"]\n' }));
    expect(requirements).toMatchObject({ source: '[dependencies.pip]', pipArgs: ['--', 'numpy>=2', '--index-url=http://elsewhere/'], notes: [] });
  });

  it('installs requirements.txt by -r, keyed by its text', async () => {
    const loaded = await app({ 'requirements.txt': 'requests==2.32.3  # http\n-r more.txt\n' });
    const requirements = await appRequirements(loaded);
    expect(requirements).toMatchObject({ source: join(loaded.dir, 'requirements.txt'), pipArgs: ['-r', join(loaded.dir, 'requirements.txt')], summary: 'requests==2.32.3, -r more.txt' });
    expect(requirements?.keyText).toBe('requests==2.32.3  # http\n-r more.txt\n');
  });

  it('prefers [dependencies.pip], and says that requirements.txt is not installed', async () => {
    const loaded = await app({ 'service.toml': '[dependencies.pip]\npackages = ["numpy"]\n', 'requirements.txt': 'pandas\n' });
    const requirements = await appRequirements(loaded);
    expect(requirements?.summary).toBe('numpy');
    expect(requirements?.notes).toEqual([`${join(loaded.dir, 'requirements.txt')} is not installed: [dependencies.pip] in service.toml is (and is what an image built by runlet dockerfile installs)`]);
  });
});
