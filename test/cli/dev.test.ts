// `runlet dev` refusing to start says what to do; starting, it suggests a call that fits each app.
import { once } from 'node:events';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { makeCustomApp } from '../support/custom-app.ts';
import { runCli } from '../support/cli.ts';
import { spawnDev, type DevProcess } from '../support/dev-process.ts';

const HELLO = resolve(import.meta.dirname, '../../examples/hello');

describe('runlet dev errors', () => {
  it('names the fix when the port is taken', async () => {
    const blocker = createServer().listen(0, '127.0.0.1');
    await once(blocker, 'listening');
    const { port } = blocker.address() as { port: number };
    try {
      const dataDir = await mkdtemp(join(tmpdir(), 'runlet-dev-cli-'));
      const result = await runCli(['dev', HELLO, '--port', String(port), '--data-dir', dataDir]);
      expect(result.code).toBe(1);
      expect(result.stderr).toMatch(new RegExp(`port ${port} on 127\\.0\\.0\\.1 is already in use: .*--port`));
    } finally {
      blocker.close();
    }
  });

  it("refuses a custom app whose port is dev's own, naming both fixes", async () => {
    const appDir = await makeCustomApp('clash');
    try {
      const port = /^port = (\d+)$/m.exec(await readFile(join(appDir, 'service.toml'), 'utf8'))![1]!;
      const dataDir = await mkdtemp(join(tmpdir(), 'runlet-dev-cli-'));
      const result = await runCli(['dev', appDir, '--port', port, '--data-dir', dataDir]);
      expect(result.code).toBe(1);
      expect(result.stderr).toContain(
        `app clash: [runtime.custom] port ${port} is the port runlet dev listens on; give the app another port in its service.toml, or run runlet dev with another --port`,
      );
    } finally {
      await rm(appDir, { recursive: true, force: true });
    }
  });

  it('names the folder that does not exist', async () => {
    const missing = await runCli(['dev', '/nonexistent/app']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/app folder \/nonexistent\/app does not exist/);
  });
});

/** A module whose first public function has required, optional, keyword-only and catch-all parameters. */
const CALCULATOR = `
import json as _json


def _helper(x):
    return x


async def scale(values: list[float], factor: int, offset: float = 0.0, *, label: str, verbose: bool = False, **extra) -> dict:
    return {"label": label, "values": [v * factor + offset for v in values]}


def describe(thing):
    return str(thing)
`;

describe('runlet dev start-up hint', () => {
  async function startDev(appDirs: string[]): Promise<DevProcess & { dispose: () => Promise<void> }> {
    const dataDir = await mkdtemp(join(tmpdir(), 'runlet-dev-hint-'));
    const dev = await spawnDev(appDirs, dataDir);
    return {
      ...dev,
      async dispose() {
        dev.child.kill('SIGTERM');
        await dev.exited;
        await rm(dataDir, { recursive: true, force: true });
      },
    };
  }

  it("lists a Python app's functions and suggests a call of its first one that runs as suggested", async () => {
    const appDir = await mkdtemp(join(tmpdir(), 'runlet-app-calc-'));
    await writeFile(join(appDir, 'main.py'), CALCULATOR);
    await writeFile(join(appDir, 'service.toml'), '[deployment]\nname = "calc"\n');
    const dev = await startDev([appDir]);
    try {
      const output = dev.output();
      expect(output).toContain(
        'runlet dev runs one replica per app and ignores [scaling] min_replicas, max_replicas, cooldown, scaling_metric, scaling_target, cold_start_timeout',
      );
      expect(output).toContain('functions: scale(values: list[float], factor: int, offset: float = …, label: str, verbose: bool = …), describe(thing)');
      const suggested = /curl -X POST (\S+) -H 'content-type: application\/json' -d '(.*)'/.exec(output);
      expect(suggested?.slice(1)).toEqual([`${dev.url}/v4/dev/calc/scale`, '{"values":[],"factor":1,"label":"text"}']);

      const response = await fetch(suggested![1]!, { method: 'POST', headers: { 'content-type': 'application/json' }, body: suggested![2] });
      expect(response.status).toBe(200);
      expect(await response.json()).toMatchObject({ result: { label: 'text', values: [] } });
    } finally {
      await dev.dispose();
      await rm(appDir, { recursive: true, force: true });
    }
  });

  it("suggests a custom app's root, which its server answers", async () => {
    const appDir = await makeCustomApp('shop');
    const dev = await startDev([appDir]);
    try {
      const output = dev.output();
      expect(output).toContain('app shop (custom: its server answers every path under the app)');
      const suggested = /^ {2}curl (\S+)$/m.exec(output);
      expect(suggested?.[1]).toBe(`${dev.url}/v4/dev/shop/`);
      expect((await fetch(suggested![1]!)).status).toBe(200);
    } finally {
      await dev.dispose();
      await rm(appDir, { recursive: true, force: true });
    }
  });
});
