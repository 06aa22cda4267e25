// The chart's own files: metadata in step with package.json, and every value documented and used.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { describe, expect, it } from 'vitest';
import { CHART_DIR } from './rendered.ts';

const packageJson = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
const chartYaml = parseYaml(readFileSync(join(CHART_DIR, 'Chart.yaml'), 'utf8')) as Record<string, unknown>;
const values = parseYaml(readFileSync(join(CHART_DIR, 'values.yaml'), 'utf8'), { version: '1.1' }) as Record<string, unknown>;
const templates = readdirSync(join(CHART_DIR, 'templates'))
  .map((name) => readFileSync(join(CHART_DIR, 'templates', name), 'utf8'))
  .join('\n');
const readme = readFileSync(join(CHART_DIR, 'README.md'), 'utf8');

/**
 * The value keys a user sets: paths down to scalars, lists and empty maps, and to maps the templates read
 * whole (resources, annotations: passed through toYaml).
 */
function valueKeys(node: Record<string, unknown>, prefix = ''): string[] {
  return Object.entries(node).flatMap(([key, value]) => {
    const path = `${prefix}${key}`;
    const isMap = typeof value === 'object' && value !== null && !Array.isArray(value);
    const readWhole = new RegExp(`\\.Values\\.${path.replaceAll('.', '\\.')}(?![\\w.])`).test(templates);
    return isMap && Object.keys(value).length > 0 && !readWhole ? valueKeys(value as Record<string, unknown>, `${path}.`) : [path];
  });
}

/** The first column of the Values table in the README. */
function documentedKeys(): string[] {
  const section = readme.slice(readme.indexOf('## Values'), readme.indexOf('\n## ', readme.indexOf('## Values') + 1));
  return [...section.matchAll(/^\| `([\w.]+)` \|/gm)].map((match) => match[1]!);
}

describe('Chart.yaml', () => {
  it('is a v2 chart named runlet whose version and appVersion are package.json’s', () => {
    expect(chartYaml).toMatchObject({ apiVersion: 'v2', name: 'runlet', type: 'application', version: packageJson.version, appVersion: packageJson.version });
    // A string: Helm reads an unquoted 0.1 as a number.
    expect(readFileSync(join(CHART_DIR, 'Chart.yaml'), 'utf8')).toContain(`appVersion: "${packageJson.version}"`);
  });
});

describe('values.yaml', () => {
  const keys = valueKeys(values);

  it('has every key documented in the README’s Values table, in order, and nothing else there', () => {
    expect(documentedKeys()).toEqual(keys);
  });

  it('has every key read by a template', () => {
    const unread = keys.filter((key) => !templates.includes(`.Values.${key}`));
    expect(unread).toEqual([]);
  });
});
