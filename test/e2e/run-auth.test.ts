// Run-interface auth through the whole pipeline (`runlet dev --auth-key-file`): nothing runs without a token
// for the app's project, and a custom app never sees the caller's token.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { localDevAuth, signLocalToken } from '../../run-request/auth/local-key.ts';
import { ContractChecker } from '../support/contract.ts';
import { makeCustomApp } from '../support/custom-app.ts';
import { FIXTURE_APPS, postJson, startTestDevServer, type TestDevServer } from '../support/dev-server.ts';
import { RawConnection } from '../support/raw-http.ts';
import { FRONT_DOORS, openFrontDoor } from '../support/run-server.ts';

const contract = new ContractChecker('run');
let dev: TestDevServer;
/** Origin of the front door under test; the management API is always the dev server's. */
let runOrigin: string;
let key: string;

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

describe.each(FRONT_DOORS)('through %s', (door) => {
  // A dev server for each door: the first test asserts the app has no runs at all yet.
  beforeAll(async () => {
    key = randomBytes(32).toString('hex');
    const keyFile = join(await mkdtemp(join(tmpdir(), 'runlet-auth-')), 'dev.key');
    await writeFile(keyFile, key + '\n');
    dev = await startTestDevServer({ appDirs: [`${FIXTURE_APPS}/e2e`, await makeCustomApp('web')], auth: localDevAuth(keyFile, 'dev') });
  });
  afterAll(async () => dev?.dispose());
  beforeEach(async () => {
    const front = await openFrontDoor(door, dev);
    runOrigin = front.origin;
    return front.close;
  });

  describe('run interface auth', () => {
    it('refuses a call without a token with 401 and WWW-Authenticate, and runs nothing', async () => {
      const response = await postJson(`${runOrigin}/v4/dev/e2e/echo`, {});
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toBe('Bearer realm="runlet"');
      expect(response.headers.get('x-request-id')).toBeTruthy();
      await contract.expectDescribed('POST', '/v4/{project_id}/{app_name}/{function}', response);
      const runs = await (await fetch(`${dev.url}/v2/projects/dev/apps/e2e/runs`)).json();
      expect(runs).toEqual({ items: [], nextToken: null });
    });

    it('runs a call with a valid token for the project', async () => {
      const token = await signLocalToken({ projectId: 'dev', key });
      const response = await postJson(`${runOrigin}/v4/dev/e2e/greet`, { name: 'Ada' }, bearer(token));
      expect(response.status).toBe(200);
      expect(await response.json()).toMatchObject({ result: { greeting: 'Hello, Ada!' } });
    });

    it('answers 401 for an expired token and a token signed with another key', async () => {
      const expired = await signLocalToken({ projectId: 'dev', key, expiresIn: -60 });
      const forged = await signLocalToken({ projectId: 'dev', key: randomBytes(32).toString('hex') });
      for (const token of [expired, forged]) {
        const response = await postJson(`${runOrigin}/v4/dev/e2e/echo`, {}, bearer(token));
        expect(response.status).toBe(401);
        expect(response.headers.get('www-authenticate')).toMatch(/^Bearer realm="runlet", error="invalid_token"/);
        const problem = (await response.json()) as { detail: string };
        expect(problem.detail).not.toContain(token);
      }
    });

    it('answers 403 for a token of another project', async () => {
      const token = await signLocalToken({ projectId: 'other', key });
      const response = await postJson(`${runOrigin}/v4/dev/e2e/echo`, {}, bearer(token));
      // Shared keys are per project: a token claiming project "other" has no key to verify it here.
      expect(response.status).toBe(401);
      const otherProject = await postJson(`${runOrigin}/v4/other/e2e/echo`, {}, bearer(await signLocalToken({ projectId: 'dev', key })));
      expect(otherProject.status).toBe(403);
      expect(((await otherProject.json()) as { type: string }).type).toBe('https://runlet.dev/problems#forbidden');
    });

    // The front reads a body whole only for a caller let in (Content-Length); node:http reads a chunked one.
    it.each([
      ['the front', 'Content-Length: 200000\r\n\r\n{"text":"'],
      ['node:http', 'Transfer-Encoding: chunked\r\n\r\n9\r\n{"text":"\r\n'],
    ])('refuses a caller with no token, or a forged one, before its body is sent (read by %s)', async (_reader, rest) => {
      const forged = await signLocalToken({ projectId: 'dev', key: randomBytes(32).toString('hex') });
      for (const authorization of ['', `Authorization: Bearer ${forged}\r\n`]) {
        const connection = await RawConnection.open(runOrigin);
        try {
          connection.write(`POST /v4/dev/e2e/echo HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n${authorization}${rest}`);
          const answer = await connection.next();
          expect(answer.status).toBe(401);
          expect(answer.headers['www-authenticate']).toMatch(/^Bearer realm="runlet"/);
          // Not kept open for a body it will never run: node:http would wait for it (and drop it) for ever.
          expect(answer.headers.connection).toBe('close');
          await connection.closedByServer();
        } finally {
          connection.close();
        }
      }
      expect(dev.replica.requestBudget.usedBytes).toBe(0);
    });

    it('refuses a caller with no token that expects 100-continue instead of the 100, so it never sends its body', async () => {
      const connection = await RawConnection.open(runOrigin);
      try {
        connection.write('POST /v4/dev/e2e/echo HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n');
        const answer = await connection.next();
        expect(answer.status).toBe(401);
        expect(answer.headers.connection).toBe('close');
        await connection.closedByServer();
      } finally {
        connection.close();
      }
      const token = await signLocalToken({ projectId: 'dev', key });
      const admitted = await RawConnection.open(runOrigin);
      try {
        admitted.write(`POST /v4/dev/e2e/greet HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${token}\r\nExpect: 100-continue\r\nContent-Length: 14\r\n\r\n`);
        expect((await admitted.next()).status).toBe(100);
        admitted.write('{"name":"Ada"}');
        expect(JSON.parse((await admitted.next()).body)).toMatchObject({ result: { greeting: 'Hello, Ada!' } });
      } finally {
        admitted.close();
      }
    });

    it('runs a call whose body comes after its head, once its token is let in', async () => {
      const token = await signLocalToken({ projectId: 'dev', key });
      const body = JSON.stringify({ name: 'Later' });
      const connection = await RawConnection.open(runOrigin);
      try {
        connection.write(`POST /v4/dev/e2e/greet HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${token}\r\nContent-Length: ${body.length}\r\n\r\n`);
        // A token not seen before is verified while the body waits; the body, sent in two parts, is then read.
        connection.write(body.slice(0, 5));
        connection.write(body.slice(5));
        const answer = await connection.next();
        expect(answer.status).toBe(200);
        expect(JSON.parse(answer.body)).toMatchObject({ result: { greeting: 'Hello, Later!' } });
      } finally {
        connection.close();
      }
    });

    it('does not forward the caller token to a custom app', async () => {
      const token = await signLocalToken({ projectId: 'dev', key });
      const response = await fetch(`${runOrigin}/v4/dev/web/headers`, { headers: { ...bearer(token), 'x-probe': '1' } });
      expect(response.status).toBe(200);
      const seen = (await response.json()) as { headers?: Record<string, string> };
      expect(seen.headers?.['x-probe']).toBe('1');
      expect(seen.headers?.authorization).toBeUndefined();
    });
  });
});
