// A change of an app's dependencies while its first install is still under way: the later preparation wins,
// and starts the app, even when it gives the interpreter the app would have had anyway.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postJson } from '../test/support/dev-server.ts';
import { buildWheel, pipEnvironment, startPipIndex, type PipIndex } from '../test/support/pip-index.ts';
import { waitFor } from '../test/support/wait.ts';
import { startDevServer, type DevServer } from './dev-server.ts';

let work: string;
let index: PipIndex;
const savedEnv = { ...process.env };

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'runlet-dependency-reload-'));
  await mkdir(join(work, 'wheels'));
  index = await startPipIndex([await buildWheel(join(work, 'wheels'), { name: 'greetpkg', version: '1.0', files: { 'greetpkg/__init__.py': '' } })]);
  // The dev server runs in this process: its pip reaches the test index only.
  for (const [name, value] of Object.entries(pipEnvironment(index))) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
});

afterAll(async () => {
  process.env = savedEnv;
  await index?.close();
  await rm(work, { recursive: true, force: true });
});

describe('a dependency change during the first install', () => {
  it('starts the app on what the change asks for', { timeout: 120_000 }, async () => {
    const app = join(work, 'app');
    await mkdir(app);
    await writeFile(join(app, 'main.py'), 'def hello() -> str:\n    return "hello"\n');
    await writeFile(join(app, 'service.toml'), '[deployment]\nname = "race"\n\n[dependencies.pip]\npackages = ["greetpkg==1.0"]\n');
    const release = index.hold();
    let server: DevServer | undefined;
    try {
      server = await startDevServer({ appDirs: [app], port: 0, projectId: 'dev', dataDir: join(work, 'data'), logger: pino({ level: 'silent' }) });
      await waitFor(() => index.requests.length > 0, { timeoutMs: 60_000, what: 'pip to ask the index' });
      // The dependency is dropped while pip waits on the index.
      await writeFile(join(app, 'service.toml'), '[deployment]\nname = "race"\n');
      const url = server.url;
      const answer = await waitFor(async () => {
        const response = await postJson(`${url}/v4/dev/race/hello`, {});
        return response.status === 200 ? ((await response.json()) as { result: string }) : null;
      }, { timeoutMs: 60_000, what: 'the app to start without its dropped dependency' });
      expect(answer.result).toBe('hello');
      expect(server.apps[0]!.environment!.current).toBeNull();
    } finally {
      release();
      await server?.close();
    }
  });
});
