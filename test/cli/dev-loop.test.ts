// The dev loop of a real `runlet dev` process: an app that cannot be imported is reported once and answered
// 503 with its error while the others serve, and is tried again when fixed; an edited app is reloaded, the
// run in flight finishing on the old code while new calls get the new, and an edit that breaks it stops it.
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { spawnDev, type DevProcess } from '../support/dev-process.ts';
import { waitFor } from '../support/wait.ts';

const HELLO = resolve(import.meta.dirname, '../../examples/hello');

const BROKEN = `"""Mid-edit: a colon missing on line 4."""


def version()
    return 1
`;

const FIXED = `def version():
    return 2
`;

/** `hold` runs until the test writes a line to the FIFO named in the call: a run in flight the test ends. */
const held = (version: string): string => `
def version():
    return "${version}"


def hold(gate: str):
    with open(gate) as fifo:
        fifo.readline()
    return "${version}"
`;

async function makeApp(name: string, source: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `runlet-dev-loop-${name}-`));
  await writeFile(join(dir, 'main.py'), source);
  await writeFile(join(dir, 'service.toml'), `[deployment]\nname = "${name}"\n`);
  return dir;
}

async function call(dev: DevProcess, app: string, fn: string, body: object = {}): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${dev.url}/v4/dev/${app}/${fn}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

function count(text: string, part: string): number {
  return text.split(part).length - 1;
}

describe('runlet dev: the dev loop', () => {
  it('reports an app that cannot be imported once, answers it 503 with the error, serves the others, and retries when it changes', async () => {
    const broken = await makeApp('broken', BROKEN);
    const dataDir = await mkdtemp(join(tmpdir(), 'runlet-dev-loop-data-'));
    const dev = await spawnDev([HELLO, broken], dataDir);
    try {
      expect(dev.output()).toMatch(/app broken\n(.*\n)*? {4}cannot be imported: main\.py line 4: SyntaxError: .*\(its calls answer 503 until its files change\)/);
      // The log line with the traceback is written by the logger's own stream, which may flush after the banner.
      await waitFor(() => count(dev.output(), 'Traceback (most recent call last)') > 0, { what: 'the traceback in the log' });
      expect(count(dev.output(), 'Traceback (most recent call last)')).toBe(1);
      expect(count(dev.output(), 'cannot import main.py: main.py line 4: SyntaxError')).toBe(1);

      expect((await call(dev, 'hello', 'run', { name: 'Ada' })).status).toBe(200);
      const refused = await call(dev, 'broken', 'version');
      expect(refused.status).toBe(503);
      expect(refused.body.type).toMatch(/app-unavailable$/);
      expect(refused.body.detail).toMatch(/^App dev\/broken cannot be imported: main\.py line 4: SyntaxError: .*It is tried again when its files change\.$/);

      const listed = await (await fetch(`${dev.url}/v2/projects/dev/apps`)).json();
      expect(listed).toEqual({
        items: [
          { name: 'broken', ready: false, error: expect.stringMatching(/^main\.py line 4: SyntaxError: /) as unknown, replicas: { ready: 0, desired: 1 }, scaling: { minReplicas: 1, maxReplicas: 10, replicaConcurrency: 4 } },
          { name: 'hello', ready: true, error: null, replicas: { ready: 1, desired: 1 }, scaling: { minReplicas: 1, maxReplicas: 10, replicaConcurrency: 4 } },
        ],
      });
      expect(await (await fetch(`${dev.url}/v2/projects/elsewhere/apps`)).json()).toEqual({ items: [] });

      await writeFile(join(broken, 'main.py'), FIXED);
      const fixed = await waitFor(async () => {
        const answer = await call(dev, 'broken', 'version');
        return answer.status === 200 && answer;
      }, { what: 'the fixed app to answer' });
      expect(fixed.body.result).toBe(2);
      expect(count(dev.output(), 'Traceback (most recent call last)')).toBe(1);
    } finally {
      dev.child.kill('SIGKILL');
      await dev.exited;
      await rm(dataDir, { recursive: true, force: true });
      await rm(broken, { recursive: true, force: true });
    }
  });

  it('says what a slow import is doing while it runs', async () => {
    // An import that takes a while, as a model loading does; well past the notice's one second.
    const app = await makeApp('slow', 'import time\n\ntime.sleep(3)\n\n\ndef ping():\n    return "pong"\n');
    const dataDir = await mkdtemp(join(tmpdir(), 'runlet-dev-loop-data-'));
    const dev = await spawnDev([app], dataDir);
    try {
      const output = dev.output();
      expect(output).toContain('runlet-runtime: importing main.py ...');
      expect(output.indexOf('importing main.py ...')).toBeLessThan(output.indexOf('listening on http'));
    } finally {
      dev.child.kill('SIGKILL');
      await dev.exited;
      await rm(dataDir, { recursive: true, force: true });
      await rm(app, { recursive: true, force: true });
    }
  });

  it('reloads an edited app: the run in flight finishes on the old code, new calls get the new', async () => {
    const app = await makeApp('edited', held('old'));
    const gate = join(app, '.gate');
    execFileSync('mkfifo', [gate]);
    const dataDir = await mkdtemp(join(tmpdir(), 'runlet-dev-loop-data-'));
    const dev = await spawnDev([app], dataDir);
    try {
      const inFlight = call(dev, 'edited', 'hold', { gate });
      await waitFor(async () => {
        const runs = (await (await fetch(`${dev.url}/v2/projects/dev/apps/edited/runs`)).json()) as { items: Array<{ status: string }> };
        return runs.items.some((run) => run.status === 'running');
      }, { what: 'the held run to be running' });

      await writeFile(join(app, 'main.py'), held('new'));
      await waitFor(async () => (await call(dev, 'edited', 'version')).body.result === 'new', { what: 'new calls to get the new code' });

      await writeFile(gate, 'go\n');
      const finished = await inFlight;
      expect(finished.status).toBe(200);
      expect(finished.body.result).toBe('old');

      // An edit that cannot be imported stops the old code too: the app answers with what its files say.
      await writeFile(join(app, 'main.py'), BROKEN);
      const refused = await waitFor(async () => {
        const answer = await call(dev, 'edited', 'version');
        return answer.status === 503 && answer;
      }, { what: 'the broken edit to be answered 503' });
      expect(refused.body.detail).toMatch(/^App dev\/edited cannot be imported: main\.py line 4: SyntaxError: /);
    } finally {
      dev.child.kill('SIGKILL');
      await dev.exited;
      await rm(dataDir, { recursive: true, force: true });
      await rm(app, { recursive: true, force: true });
    }
  });
});
