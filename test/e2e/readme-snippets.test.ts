// The README's code, run as written: the Python `requests` streaming client against `runlet dev`.
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestDevServer, type TestDevServer } from '../support/dev-server.ts';

const ROOT = resolve(import.meta.dirname, '../..');
let dev: TestDevServer;

beforeAll(async () => {
  dev = await startTestDevServer({ appDirs: [resolve(ROOT, 'examples/hello')] });
});
afterAll(async () => dev?.dispose());

/** The first ```python block of the README that contains `marker`. */
async function readmePython(marker: string): Promise<string> {
  const readme = await readFile(resolve(ROOT, 'README.md'), 'utf8');
  const block = [...readme.matchAll(/```python\n([\s\S]*?)```/g)].map((match) => match[1]!).find((code) => code.includes(marker));
  if (!block) throw new Error(`README.md has no python block with ${marker}`);
  return block;
}

function runPython(code: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolveRun, reject) => {
    const child = spawn('python3', ['-c', code], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (exitCode) => resolveRun({ code: exitCode, stdout, stderr }));
  });
}

describe('README snippets', () => {
  it('the Python requests client prints one line per streamed item', async () => {
    const snippet = (await readmePython('iter_lines')).replace('http://localhost:8080', dev.url).replace('"n": 3', '"n": 3, "pause": 0');
    const result = await runPython(snippet);
    expect(result.stderr).toBe('');
    expect(result.stdout.trim().split('\n').map((line) => JSON.parse(line) as unknown)).toEqual([
      { item: 1, of: 3 },
      { item: 2, of: 3 },
      { item: 3, of: 3 },
    ]);
  });
});
