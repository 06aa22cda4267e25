// `runlet manifest` and `runlet dockerfile` on real app folders.
import { mkdir, mkdtemp, readFile, writeFile, cp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { describe, expect, it } from 'vitest';
import { validateApp } from '../../crds/validate.ts';
import { runCli } from '../support/cli.ts';

const HELLO = resolve(import.meta.dirname, '../../examples/hello');

async function appCopy(serviceToml?: string): Promise<string> {
  const dir = join(await mkdtemp(join(tmpdir(), 'runlet-cli-')), 'shop');
  await cp(HELLO, dir, { recursive: true });
  if (serviceToml !== undefined) await writeFile(join(dir, 'service.toml'), serviceToml);
  return dir;
}

describe('runlet manifest', () => {
  it('prints the code ConfigMap and a valid App for a Python app folder', async () => {
    const result = await runCli(['manifest', HELLO, '--namespace', 'team-a']);
    expect(result.code).toBe(0);
    const [configMap, app] = parseAllDocuments(result.stdout).map((document) => document.toJS() as Record<string, any>);
    expect(configMap).toMatchObject({ kind: 'ConfigMap', metadata: { name: 'hello-code', namespace: 'team-a' } });
    expect(configMap!.data['main.py']).toBe(await readFile(join(HELLO, 'main.py'), 'utf8'));
    expect(app).toMatchObject({ apiVersion: 'runlet.dev/v1alpha1', kind: 'App', metadata: { name: 'hello', namespace: 'team-a' } });
    expect(app!.spec.runtime.python.code).toEqual({ configMap: { name: 'hello-code' } });
    expect(validateApp(app)).toEqual([]);
  });

  it('bakes the code into an image with --image (no ConfigMap)', async () => {
    const result = await runCli(['manifest', HELLO, '--image', 'registry.example/hello:1']);
    const documents = parseAllDocuments(result.stdout).map((document) => document.toJS() as Record<string, any>);
    expect(documents).toHaveLength(1);
    expect(documents[0]!.spec.runtime.python).toMatchObject({ image: 'registry.example/hello:1', code: { baked: true } });
  });

  it('names the key of an invalid value and exits non-zero', async () => {
    const dir = await appCopy('[scaling]\nresponse_grace_period = 0\n');
    const result = await runCli(['manifest', dir]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/\[scaling\] response_grace_period must be an integer from 1 to 43200/);
  });

  it('refuses a folder with subfolders and says how to bake the code instead', async () => {
    const dir = await appCopy();
    await mkdir(join(dir, 'lib'));
    const result = await runCli(['manifest', dir]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/is a folder.*runlet dockerfile/);
  });
});

describe('runlet dockerfile', () => {
  it('writes a Dockerfile FROM the runtime image with the pip packages quoted', async () => {
    const dir = await appCopy('[deployment]\nname = "shop"\n\n[dependencies.pip]\npackages = ["numpy>=2", "requests==2.32.3"]\n');
    const result = await runCli(['dockerfile', dir, '--base-image', 'runlet/python-runtime:test']);
    expect(result.code).toBe(0);
    const dockerfile = await readFile(join(dir, 'Dockerfile'), 'utf8');
    expect(dockerfile).toContain('FROM runlet/python-runtime:test\n');
    expect(dockerfile).toContain("RUN pip install --no-cache-dir 'numpy>=2' requests==2.32.3\n");
    expect(dockerfile).toContain('COPY --chown=10001:10001 . /app\nUSER 10001\n');
    expect(result.stderr).toMatch(/runlet deploy .* --image IMAGE/);
  });

  it('refuses a custom-runtime app, which brings its own image', async () => {
    const dir = await appCopy('[runtime.custom]\nimage = "x/y:1"\nport = 8080\n');
    const result = await runCli(['dockerfile', dir]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/custom-runtime app/);
  });
});
