// `runlet dev` serves both documents, without auth, identical to the committed copies (with an auth key, as it
// then serves the API key operations too).
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { localDevAuth } from '../../run-request/auth/local-key.ts';
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FIXTURE_APPS, startTestDevServer, type TestDevServer } from '../support/dev-server.ts';

let dev: TestDevServer;
beforeAll(async () => {
  const keyFile = join(await mkdtemp(join(tmpdir(), 'runlet-served-documents-')), 'dev.key');
  await writeFile(keyFile, 'the auth key of the served documents test, 32 bytes or more');
  dev = await startTestDevServer({ appDirs: [`${FIXTURE_APPS}/e2e`], auth: localDevAuth(keyFile, 'dev') });
});
afterAll(async () => dev?.dispose());

describe('runlet dev serves the OpenAPI documents', () => {
  it.each([
    ['/v4/openapi.json', 'docs/openapi-run.json'],
    ['/v2/openapi.json', 'docs/openapi-management.json'],
  ])('GET %s equals %s', async (path, file) => {
    const response = await fetch(`${dev.url}${path}`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    const committed = JSON.parse(await readFile(resolve(import.meta.dirname, '../..', file), 'utf8')) as unknown;
    expect(await response.json()).toEqual(committed);
  });
});
