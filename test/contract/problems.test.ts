// The one problem catalogue (crds/problems.ts) and everything that must follow it: docs/problems.md, where every
// type URI leads; the Python runtime's generated copy, and the problem documents the runtime actually builds;
// the README's table of run-interface errors.
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { PROBLEM_TYPE_BASE, problemTypeUri } from '../../crds/problem.ts';
import { Problems } from '../../crds/problems.ts';
import { PYTHON_PROBLEM_TYPES_FILE, renderPythonProblemTypes } from '../../crds/problems-python.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const PYTHON_RUNTIME = resolve(ROOT, 'runtime/python');
const specs = Object.values(Problems);
const specOf = (code: string) => specs.find((spec) => spec.code === code);

/** Runs a Python snippet with the runtime importable; returns what it printed as JSON. */
async function python(script: string): Promise<unknown> {
  const { stdout } = await promisify(execFile)(process.env.RUNLET_PYTHON ?? 'python3', ['-c', script], {
    cwd: PYTHON_RUNTIME,
    env: { ...process.env, PYTHONPATH: PYTHON_RUNTIME, PYTHONDONTWRITEBYTECODE: '1' },
  });
  return JSON.parse(stdout);
}

/** docs/problems.md as sections: each `## heading` with the first non-empty line under it. */
function docSections(markdown: string): Array<{ heading: string; firstLine: string }> {
  return markdown
    .split(/^## /m)
    .slice(1)
    .map((section) => {
      const [heading = '', ...lines] = section.split('\n');
      return { heading: heading.trim(), firstLine: lines.find((line) => line.trim() !== '')?.trim() ?? '' };
    });
}

describe('the problem catalogue', () => {
  it('has unique kebab-case codes, each under its camelCase key', () => {
    for (const [key, spec] of Object.entries(Problems)) {
      expect(spec.code, key).toMatch(/^[a-z][a-z0-9]*(-[a-z0-9]+)*$/);
      expect(key, spec.code).toBe(spec.code.replaceAll(/-([a-z0-9])/g, (_, letter: string) => letter.toUpperCase()));
      expect(spec.status, spec.code).toBeGreaterThanOrEqual(400);
      expect(spec.status, spec.code).toBeLessThan(600);
    }
    expect(new Set(specs.map((spec) => spec.code)).size).toBe(specs.length);
  });

  it('makes every type URI an anchor of the problems page', () => {
    expect(problemTypeUri('timeout')).toBe('https://runlet.dev/problems#timeout');
    expect(URL.parse(problemTypeUri('over-capacity'))?.hash).toBe('#over-capacity');
  });
});

describe('docs/problems.md', () => {
  it('documents every type under a heading that is its code (the anchor its type URI names), and nothing else', async () => {
    const sections = docSections(await readFile(resolve(ROOT, 'docs/problems.md'), 'utf8'));
    expect(sections.map((section) => section.heading).sort()).toEqual(specs.map((spec) => spec.code).sort());
  });

  it('gives each type the status and title the catalogue does', async () => {
    for (const { heading, firstLine } of docSections(await readFile(resolve(ROOT, 'docs/problems.md'), 'utf8'))) {
      const spec = specOf(heading);
      // `status` · title · who answers it
      const [status, title, answeredBy] = firstLine.split(' · ');
      expect([status, title], heading).toEqual([`\`${spec?.status}\``, spec?.title]);
      expect(answeredBy, heading).toMatch(/\S/);
    }
  });
});

describe("the Python runtime's problems", () => {
  it('are generated from the catalogue (stale: run npm run problems)', async () => {
    const committed = await readFile(resolve(ROOT, PYTHON_PROBLEM_TYPES_FILE), 'utf8');
    expect(committed === renderPythonProblemTypes(), `${PYTHON_PROBLEM_TYPES_FILE} is stale: run npm run problems`).toBe(true);
  });

  it('read, as Python, as the catalogue', async () => {
    const read = await python(
      'import json; from runlet_runtime.problem_types import PROBLEM_TYPES, TYPE_BASE; print(json.dumps([TYPE_BASE, PROBLEM_TYPES]))',
    );
    const expected = Object.fromEntries(specs.map((spec) => [spec.code, [spec.status, spec.title]]));
    expect(read).toEqual([PROBLEM_TYPE_BASE, expected]);
  });

  it('are answered with the type, status and title of the catalogue', async () => {
    const bodies = (await python(
      [
        'import json; from runlet_runtime import problems',
        'built = [problems.function_not_found("main", "f"), problems.invalid_arguments("f", ["a"], []),',
        '  problems.invalid_json("x"), problems.body_not_object([]), problems.method_not_allowed("GET", "POST"),',
        '  problems.body_too_large(2, 1), problems.length_required(), problems.headers_too_large(1),',
        '  problems.malformed_request("x"), problems.json_too_deep(), problems.json_integer_too_long(4300),',
        '  problems.internal_error("x"), problems.DRAINING]',
        'print(json.dumps([{"status": p.status, **json.loads(p.body)} for p in built]))',
      ].join('\n'),
    )) as Array<{ status: number; type: string; title: string }>;
    expect(bodies).toHaveLength(13);
    for (const body of bodies) {
      const spec = specOf(body.type.slice(PROBLEM_TYPE_BASE.length));
      expect(spec, body.type).toBeDefined();
      expect(body).toMatchObject({ type: problemTypeUri(spec!.code), title: spec!.title, status: spec!.status });
    }
  });
});

describe('the README', () => {
  it('lists only catalogued codes in its table of run-interface errors', async () => {
    const readme = await readFile(resolve(ROOT, 'README.md'), 'utf8');
    const table = readme.slice(readme.indexOf(`| status | \`type\` (after \`${PROBLEM_TYPE_BASE}\`)`));
    const rows = table.slice(0, table.indexOf('\n\n')).split('\n').slice(2);
    const codes = rows.flatMap((row) => [...(row.split('|')[2] ?? '').matchAll(/`([a-z-]+)`/g)].map((match) => match[1]));
    expect(codes.length).toBeGreaterThan(10);
    for (const code of codes) expect(specOf(code!), code).toBeDefined();
  });
});
