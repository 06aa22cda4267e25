// What a sidecar loads to start: none of the modules it does not use. Each costs resident memory in every pod
// (the sidecar's target is 80 MB after load): Node's bundled undici with http2, tls and web streams (13 MB,
// pulled in by an ES module import of node:http), prom-client's index (Pushgateway with https and zlib, cluster:
// 17 MB), zlib before a gzipped stream, node:sqlite where runs are not kept in SQLite, and the schema library
// TypeBox (about 200 modules, 6 MB), which the record and App schemas are written in and the sidecar does not check
// anything against.
import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import type * as promClient from 'prom-client';
import { Counter, Gauge, Histogram, Registry } from './prom-client.ts';

const SIDECAR_MAIN = join(import.meta.dirname, 'main.ts');
const CLI_SIDECAR = join(import.meta.dirname, '../cli/sidecar-command.ts');
/** Node's own modules the sidecar must not load to start (moduleLoadList's names). */
const UNWANTED = /^NativeModule (internal\/deps\/undici\/undici|http2|tls|https|zlib|cluster|sqlite)$/;

/** What a fresh process loaded by importing `modules`: the Node modules of those it must not, and the npm packages. */
async function loadedBy(...modules: string[]): Promise<{ unwanted: string[]; packages: string[] }> {
  const script = [
    // Every module resolved, its package noted: npm packages are not in moduleLoadList.
    `const packages = new Set();`,
    `(await import('node:module')).registerHooks({ resolve(specifier, context, next) {`,
    `  const resolved = next(specifier, context);`,
    `  const found = /\\/node_modules\\/((?:@[^/]+\\/)?[^/]+)\\//.exec(resolved.url);`,
    `  if (found) packages.add(found[1]);`,
    `  return resolved;`,
    `} });`,
    ...modules.map((module) => `await import(${JSON.stringify(module)});`),
    `process.stdout.write(JSON.stringify({ unwanted: process.moduleLoadList.filter((name) => ${UNWANTED}.test(name)), packages: [...packages] }));`,
  ].join('\n');
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], { timeout: 60_000 });
  return JSON.parse(stdout) as { unwanted: string[]; packages: string[] };
}

describe('the sidecar at start', () => {
  it('loads neither undici, http2, tls, https, zlib, cluster, sqlite nor TypeBox', async () => {
    const loaded = await loadedBy(SIDECAR_MAIN, CLI_SIDECAR);
    expect(loaded.unwanted).toEqual([]);
    // The hook sees packages: pino is one the sidecar loads.
    expect(loaded.packages).toContain('pino');
    expect(loaded.packages).not.toContain('@sinclair/typebox');
  });

  it('takes prom-client\'s classes from the files its index exports them from', () => {
    // The package's own index, loaded here only to compare (the sidecar never loads it).
    const index = createRequire(import.meta.url)('prom-client') as typeof promClient;
    expect(Registry).toBe(index.Registry);
    expect(Counter).toBe(index.Counter);
    expect(Gauge).toBe(index.Gauge);
    expect(Histogram).toBe(index.Histogram);
    const registry = new Registry();
    new Counter({ name: 'start_modules_total', help: 'a counter', registers: [registry] }).inc(2);
    return expect(registry.metrics()).resolves.toContain('start_modules_total 2');
  });
});
