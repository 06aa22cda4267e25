// The README's webhook receivers (examples/webhook-receiver), run for real against signed deliveries.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebhookSigner } from '../../sidecar/webhook/sign.ts';
import { FIXTURE_APPS, postJson, startTestDevServer, type TestDevServer } from '../support/dev-server.ts';
import { RawConnection } from '../support/raw-http.ts';
import { FRONT_DOORS, openFrontDoor } from '../support/run-server.ts';
import { waitFor } from '../support/wait.ts';

const EXAMPLES = resolve(import.meta.dirname, '../../examples/webhook-receiver');
const SECRET = 'readme-secret';
/** Sent as its UTF-8 bytes, as any client sends it; a receiver holds it as text and keys with `secret.encode()`. */
const NON_ASCII_SECRET = 'sécret-ключ-🔑';
let dev: TestDevServer;

beforeAll(async () => {
  dev = await startTestDevServer({ appDirs: [`${FIXTURE_APPS}/e2e`] });
});
afterAll(async () => dev?.dispose());

/** Starts a receiver on a free port and collects its output lines. */
async function startReceiver(command: string, file: string, secret = SECRET): Promise<{ url: string; lines: string[]; child: ChildProcess }> {
  const child = spawn(command, [resolve(EXAMPLES, file), '--port', '0', '--secret', secret], { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines: string[] = [];
  const url = await new Promise<string>((resolveUrl, reject) => {
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      lines.push(...chunk.split('\n').filter(Boolean));
      const listening = lines.find((line) => line.startsWith('listening on '));
      if (listening) resolveUrl(listening.slice('listening on '.length));
    });
    child.once('exit', (code) => reject(new Error(`${file} exited with ${code}`)));
  });
  return { url, lines, child };
}

describe('the README shows the receivers\' verification code as it is in the files', () => {
  it.each([
    ['receiver.py', /def verify_signature[\s\S]*?return hmac\.compare_digest\(received, expected\)\n/],
    ['receiver.mjs', /export function verifySignature[\s\S]*?\n\}\n/],
  ])('%s', async (file, pattern) => {
    const source = await readFile(resolve(EXAMPLES, file), 'utf8');
    const readme = await readFile(resolve(EXAMPLES, '../../README.md'), 'utf8');
    const code = pattern.exec(source)?.[0];
    expect(code).toBeDefined();
    expect(readme).toContain(code);
  });
});

describe.each([
  ['python3', 'receiver.py'],
  [process.execPath, 'receiver.mjs'],
])('%s %s', (command, file) => {
  it('verifies a signed delivery and rejects one signed with another secret', async () => {
    const receiver = await startReceiver(command, file);
    try {
      const signed = await postJson(`${dev.url}/v4/dev/e2e/greet?webhookEndpoint=${encodeURIComponent(receiver.url)}`, { name: 'R' }, { 'x-webhook-secret': SECRET });
      const runId = signed.headers.get('x-request-id');
      const forged = await postJson(`${dev.url}/v4/dev/e2e/greet?webhookEndpoint=${encodeURIComponent(receiver.url)}`, { name: 'F' }, { 'x-webhook-secret': 'wrong' });
      const forgedId = forged.headers.get('x-request-id')!;
      const record = async (id: string) => ((await (await fetch(`${dev.url}/v2/projects/dev/apps/e2e/runs/${id}`)).json()) as { item: { webhook: { state: string; lastStatusCode: number } } }).item;
      await waitFor(async () => (await record(forgedId)).webhook.state === 'failed', { what: 'the forged delivery to be refused' });
      expect((await record(forgedId)).webhook.lastStatusCode).toBe(401);
      await waitFor(() => receiver.lines.includes(`verified run ${runId} success`), { what: 'the receiver to verify the run' });
      expect(receiver.lines.filter((line) => line.startsWith('verified'))).toEqual([`verified run ${runId} success`]);
    } finally {
      receiver.child.kill();
      await once(receiver.child, 'exit');
    }
  });
});

describe.each([
  ['python3', 'receiver.py'],
  [process.execPath, 'receiver.mjs'],
])('%s %s, with a secret outside ASCII', (command, file) => {
  it.each(FRONT_DOORS)('verifies the delivery of a call through %s that sent the secret as UTF-8 bytes', async (door) => {
    const receiver = await startReceiver(command, file, NON_ASCII_SECRET);
    const frontDoor = await openFrontDoor(door, dev);
    const connection = await RawConnection.open(frontDoor.origin);
    try {
      const body = '{"name":"U"}';
      const head =
        `POST /v4/dev/e2e/greet?webhookEndpoint=${encodeURIComponent(receiver.url)} HTTP/1.1\r\nHost: localhost\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${body.length}\r\nX-Webhook-Secret: `;
      connection.write(Buffer.concat([Buffer.from(head), Buffer.from(NON_ASCII_SECRET, 'utf8'), Buffer.from(`\r\n\r\n${body}`)]));
      const answer = await connection.next();
      expect(answer.status).toBe(200);
      const runId = answer.headers['x-request-id'];
      await waitFor(() => receiver.lines.includes(`verified run ${runId} success`), { what: 'the receiver to verify the run' });
    } finally {
      connection.close();
      await frontDoor.close();
      receiver.child.kill();
      await once(receiver.child, 'exit');
    }
  });
});

describe.each([
  ['python3', 'receiver.py'],
  [process.execPath, 'receiver.mjs'],
])('%s %s, timestamp window', (command, file) => {
  it('refuses a genuine signature whose timestamp is more than 5 minutes from now (a replay)', async () => {
    const receiver = await startReceiver(command, file);
    const signer = new WebhookSigner(SECRET);
    /** A delivery signed with the right secret at `timestamp`, posted straight to the receiver. */
    const deliver = async (runId: string, timestamp: number | string) => {
      const body = JSON.stringify({ run_id: runId, status: 'success' });
      const headers = typeof timestamp === 'number' ? signer.headers(runId, timestamp, body)
        : { 'x-service-webhook-timestamp': timestamp, 'x-service-webhook-signature': signer.sign(runId, Number(timestamp), body) };
      const response = await fetch(receiver.url, { method: 'POST', body, headers: { 'content-type': 'application/json', 'x-request-id': runId, ...headers } });
      return response.status;
    };
    try {
      const now = Math.floor(Date.now() / 1000);
      expect(await deliver('run-stale', now - 6 * 60)).toBe(401);
      expect(await deliver('run-ahead', now + 6 * 60)).toBe(401);
      // Number('1e3') is a number and Python's int() takes '١٠': only ASCII digits are a timestamp.
      expect(await deliver('run-exponent', `${now}e0`)).toBe(401);
      expect(await deliver('run-fresh', now - 60)).toBe(204);
      await waitFor(() => receiver.lines.includes('verified run run-fresh success'), { what: 'the receiver to log the fresh delivery' });
      expect(receiver.lines.filter((line) => line.startsWith('verified'))).toEqual(['verified run run-fresh success']);
    } finally {
      receiver.child.kill();
      await once(receiver.child, 'exit');
    }
  });
});
