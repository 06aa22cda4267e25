// One name for each image everywhere a user reads or gets one: what `make images` tags, the CLI's defaults, the
// chart's values and README, install.yaml, the docs. No engine needed.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { PYTHON_RUNTIME_IMAGE_REPOSITORY, RUNLET_IMAGE_REPOSITORY } from '../../cli/images.ts';

const REPO = resolve(import.meta.dirname, '../..');
const NAMES = new Set([RUNLET_IMAGE_REPOSITORY, PYTHON_RUNTIME_IMAGE_REPOSITORY]);
/** Where users meet the names. Tests are left out: they may name images that do not exist on purpose. */
const SCANNED = ['README.md', 'Makefile', 'Dockerfile', 'install.yaml', 'runtime/python/Dockerfile', 'docs', 'charts', 'images', 'cli', 'operator'];
/** An image of the project: runlet/<name> not inside a path (`/opt/runlet/...`), optionally after a registry. */
const IMAGE_REFERENCE = /(?<![\w./-])(?:([\w-]+(?:\.[\w-]+)+(?::\d+)?)\/)?runlet\/((?:runlet|python)[\w.-]*)/g;

function files(path: string): string[] {
  const absolute = join(REPO, path);
  try {
    return readdirSync(absolute, { withFileTypes: true }).flatMap((entry) => files(join(path, entry.name)));
  } catch {
    return [absolute];
  }
}

describe('image names', () => {
  it('the chart names the repositories make images tags', () => {
    const values = parseYaml(readFileSync(join(REPO, 'charts/runlet/values.yaml'), 'utf8')) as {
      operator: { image: { repository: string } };
      apps: { pythonRuntime: { image: { repository: string } } };
    };
    expect(values.operator.image.repository).toBe(RUNLET_IMAGE_REPOSITORY);
    expect(values.apps.pythonRuntime.image.repository).toBe(PYTHON_RUNTIME_IMAGE_REPOSITORY);
    const makefile = readFileSync(join(REPO, 'Makefile'), 'utf8');
    const script = readFileSync(join(REPO, 'images/images.sh'), 'utf8');
    expect(makefile).toMatch(/^IMAGE_REPO \?= runlet$/m);
    for (const name of NAMES) expect(script).toContain(`"$IMAGE_REPO/${name.split('/')[1]}:$version"`);
  });

  it('the chart’s embedded PostgreSQL image is the one make images provides (pulled, or its stand-in)', () => {
    const values = parseYaml(readFileSync(join(REPO, 'charts/runlet/values.yaml'), 'utf8')) as {
      results: { postgres: { embedded: { image: { repository: string; tag: string } } } };
    };
    const { repository, tag } = values.results.postgres.embedded.image;
    const script = readFileSync(join(REPO, 'images/postgres-stand-in.sh'), 'utf8');
    expect(script).toMatch(new RegExp(`^POSTGRES_IMAGE=${repository}:${tag}$`, 'm'));
  });

  it('the README’s own-registry walkthrough pushes what make images tags there, and points existing chart values at it', () => {
    const readme = readFileSync(join(REPO, 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('#### From your own registry'));
    // A `shell` block: the walkthrough test runs the section's `sh` blocks on the test tier, which has no registry.
    const block = section.match(/```shell\n([\s\S]*?)```/)![1]!.replaceAll('\\\n', ' ');
    const repo = block.match(/make images IMAGE_REPO=(\S+)/)![1]!;
    const { version } = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string };
    const pushed = [...block.matchAll(/docker push (\S+)/g)].map(([, image]) => image);
    expect(pushed).toEqual([...NAMES].map((name) => `${repo}/${name.split('/')[1]}:${version}`));
    const values = parseYaml(readFileSync(join(REPO, 'charts/runlet/values.yaml'), 'utf8')) as Record<string, unknown>;
    const sets = new Map([...block.matchAll(/--set '?([\w.[\]]+)=([^'\s]+)'?/g)].map(([, key, value]) => [key!, value!]));
    for (const key of sets.keys()) {
      const path = key.replace(/\[\d+\]\.name$/, '').split('.');
      expect(path.reduce<unknown>((node, part) => (node as Record<string, unknown> | undefined)?.[part], values), `values.yaml has ${key}`).toBeDefined();
    }
    expect(sets.get('operator.image.repository')).toBe(pushed[0]!.replace(/:[^:]*$/, ''));
    expect(sets.get('apps.pythonRuntime.image.repository')).toBe(pushed[1]!.replace(/:[^:]*$/, ''));
    expect(sets.get('apps.imagePullSecrets[0].name')).toBe(sets.get('operator.imagePullSecrets[0].name'));
  });

  it('README, docs, chart, install.yaml and code name no other image of the project', () => {
    const others = SCANNED.flatMap(files)
      .filter((file) => !file.endsWith('.test.ts'))
      .flatMap((file) =>
        [...readFileSync(file, 'utf8').matchAll(IMAGE_REFERENCE)]
          // docker.io/runlet/runlet is runlet/runlet spelled out, as a kubelet reads it.
          .filter(([, registry, name]) => (registry !== undefined && registry !== 'docker.io') || !NAMES.has(`runlet/${name!.replace(/[.:].*$/, '')}`))
          .map(([reference]) => `${relative(REPO, file)}: ${reference}`),
      );
    expect(others).toEqual([]);
  });
});
