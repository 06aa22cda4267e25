// kubectl against the fake, validation on, as the README's walkthrough uses it on a real cluster: its
// client-side validation and `explain` read the OpenAPI documents (v2 in protobuf; v3 for explain from
// kubectl 1.27), `get -o wide` asks for Tables, `get runlet`/`get rl` resolve categories and short names
// through discovery. Run with every kubectl this machine has: the control-plane tier's 1.20 and the one on PATH.

import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { tierKubectlPath } from '../control-plane/control-plane.ts';
import { startKubeApiServer, type KubeApiServer } from './index.ts';

const run = promisify(execFile);
const CRDS = ['apps.runlet.dev.yaml', 'runlogs.runlet.dev.yaml'].map((file) => join(import.meta.dirname, '../../crds', file));
const onPath = (process.env.PATH ?? '').split(':').map((dir) => join(dir, 'kubectl')).find((path) => existsSync(path));
const KUBECTLS = [...new Set([tierKubectlPath(), onPath].filter((path): path is string => path !== undefined && existsSync(path)))];

const APP = `apiVersion: runlet.dev/v1alpha1
kind: App
metadata:
  name: hello
spec:
  runtime:
    python:
      code:
        baked: true
`;

let server: KubeApiServer;
let dir: string;

beforeEach(async () => {
  server = await startKubeApiServer();
  dir = await mkdtemp(join(tmpdir(), 'runlet-fake-kubectl-'));
  await server.writeKubeconfig(join(dir, 'kubeconfig'));
});

afterEach(async () => {
  await server.close();
  await rm(dir, { recursive: true, force: true });
});

async function kubectl(binary: string, ...args: string[]): Promise<string> {
  const { stdout } = await run(binary, args, { env: { ...process.env, KUBECONFIG: join(dir, 'kubeconfig') } });
  return stdout;
}

async function kubectlError(binary: string, ...args: string[]): Promise<string> {
  try {
    await kubectl(binary, ...args);
  } catch (error) {
    return (error as { stderr: string }).stderr;
  }
  throw new Error(`kubectl ${args.join(' ')} succeeded but should have failed`);
}

describe('kubectl against the fake API server', () => {
  it('finds a kubectl to test with', () => {
    expect(KUBECTLS.length).toBeGreaterThan(0);
  });

  for (const binary of KUBECTLS) {
    it(`${binary}: applies with validation on, refuses unknown fields itself, explains, prints columns`, async () => {
      await kubectl(binary, 'apply', '-f', CRDS[0]!, '-f', CRDS[1]!);
      await writeFile(join(dir, 'app.yaml'), APP);
      expect(await kubectl(binary, 'apply', '-f', join(dir, 'app.yaml'))).toContain('app.runlet.dev/hello created');

      await writeFile(join(dir, 'bad.yaml'), APP.replace('  runtime:', '  bogus: 1\n  runtime:'));
      expect(await kubectlError(binary, 'apply', '-f', join(dir, 'bad.yaml'))).toContain('unknown field "bogus"');

      expect(await kubectl(binary, 'explain', 'apps.spec.runtime')).toMatch(/python\s+<Object>/);

      const wide = (await kubectl(binary, 'get', 'apps', '-o', 'wide')).split('\n');
      expect(wide[0]!.split(/\s+/)).toEqual(['NAME', 'DESIRED', 'READY', 'SCALING', 'URL', 'AGE']);
      expect(wide[1]).toMatch(/^hello\s+\d+s$/);
      expect(await kubectl(binary, 'get', 'runlet')).toContain('app.runlet.dev/hello');
      expect(await kubectl(binary, 'get', 'rl', '-o', 'name')).toBe('');
    });
  }
});
