import { appendFileSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { WebhookSigner } from '../webhook/sign.ts';
import { WEBHOOK_DESTINATIONS_FILE_NAME, WebhookDestinationsFile } from './webhook-destinations-file.ts';

const logger = pino({ level: 'silent' });
let dataDir: string;
const opened: WebhookDestinationsFile[] = [];

beforeEach(() => {
  dataDir = mkdtempSync(join(tmpdir(), 'runlet-destinations-'));
});

afterEach(async () => {
  for (const file of opened.splice(0)) await file.close();
  rmSync(dataDir, { recursive: true, force: true });
});

async function openFile(maxBytes?: number): Promise<WebhookDestinationsFile> {
  const file = await WebhookDestinationsFile.open({ dataDir, logger, maxBytes });
  opened.push(file);
  return file;
}

const path = (): string => join(dataDir, WEBHOOK_DESTINATIONS_FILE_NAME);

describe('WebhookDestinationsFile', () => {
  it('hands the next sidecar the destinations kept and not settled, skipping a torn last line', async () => {
    const first = await openFile();
    await first.keep('run-a', 'https://hooks.example/a?token=1');
    await first.keep('run-b', 'https://hooks.example/b?token=2');
    first.settle('run-a');
    await first.close();
    opened.splice(0);
    appendFileSync(path(), '{"run":"run-c","destin');

    const second = await openFile();
    expect(second.recoveredRunIds).toEqual(['run-b']);
    expect(second.destinationOf('run-b')).toBe('https://hooks.example/b?token=2');
    expect(second.destinationOf('run-a')).toBeUndefined();
  });

  it('cuts a torn last line off before appending: a delivery kept after a crash mid-append survives the next crash', async () => {
    const first = await openFile();
    await first.keep('run-b', 'https://hooks.example/b?token=2');
    await first.close();
    opened.splice(0);
    appendFileSync(path(), '{"run":"run-c","destin');

    // The successor keeps a delivery, and is killed before any rewrite: its line must not be glued to the torn one.
    const second = await openFile();
    await second.keepDelivery('run-d', { destination: 'https://hooks.example/d?token=4', signer: new WebhookSigner(Buffer.alloc(32, 7)) });
    await second.close();
    opened.splice(0);

    const third = await openFile();
    expect([...third.recoveredRunIds].sort()).toEqual(['run-b', 'run-d']);
    expect(third.deliveryOf('run-d')).toMatchObject({ destination: 'https://hooks.example/d?token=4', signer: expect.any(WebhookSigner) });
  });

  it('reads a file with garbage lines and a secret that decodes to nothing: the other deliveries are kept, and none throws', async () => {
    const first = await openFile();
    await first.keepDelivery('run-a', { destination: 'https://hooks.example/a', signer: new WebhookSigner(Buffer.alloc(32, 1)), body: '{"ok":true}' });
    await first.close();
    opened.splice(0);
    appendFileSync(path(), '\u0000\u0000garbage\n[1,2]\nnull\n{"run":"run-b","destination":"https://hooks.example/b","secret":"!!!!"}\n');

    const second = await openFile();
    expect([...second.recoveredRunIds].sort()).toEqual(['run-a', 'run-b']);
    expect(second.deliveryOf('run-a')).toMatchObject({ body: '{"ok":true}', signer: expect.any(WebhookSigner) });
    // No key to sign with: sent unsigned (the receiver decides), rather than the sidecar failing to start.
    expect(second.deliveryOf('run-b')).toMatchObject({ destination: 'https://hooks.example/b', signer: null });
  });

  it('empties the file once every destination is settled', async () => {
    const file = await openFile();
    await file.keep('run-a', 'https://hooks.example/a?token=1');
    expect(readFileSync(path(), 'utf8')).toContain('token=1');
    file.settle('run-a');
    await file.close();
    opened.splice(0);
    expect(statSync(path()).size).toBe(0);
  });

  it('rewrites the file with the pending destinations only once it passes its bound', async () => {
    const file = await openFile(400);
    await file.keep('kept', 'https://hooks.example/kept');
    for (let i = 0; i < 20; i++) {
      await file.keep(`run-${i}`, `https://hooks.example/${i}`);
      file.settle(`run-${i}`);
    }
    await file.keep('last', 'https://hooks.example/last');
    expect(statSync(path()).size).toBeLessThanOrEqual(400);
    await file.close();
    opened.splice(0);
    const again = await openFile();
    expect([...again.recoveredRunIds].sort()).toEqual(['kept', 'last']);
  });
  it('hands the next sidecar a delivery\'s secret and body, the latest kept of each run, in a file only its owner reads', async () => {
    const first = await openFile();
    await first.keepDelivery('run-a', { destination: 'https://hooks.example/a', signer: new WebhookSigner('s3cret') });
    await first.keepDelivery('run-a', { destination: 'https://hooks.example/a', signer: new WebhookSigner('s3cret'), body: '{"run_id":"run-a"}' });
    await first.keepDelivery('run-b', { destination: 'https://hooks.example/b', signer: null });
    expect(statSync(path()).mode & 0o777).toBe(0o600);
    await first.close();
    opened.splice(0);

    const second = await openFile();
    const a = second.deliveryOf('run-a')!;
    expect(a).toMatchObject({ destination: 'https://hooks.example/a', body: '{"run_id":"run-a"}' });
    expect(a.signer!.sign('run-a', 1, 'x')).toBe(new WebhookSigner('s3cret').sign('run-a', 1, 'x'));
    expect(second.deliveryOf('run-b')).toEqual({ destination: 'https://hooks.example/b', signer: null });
  });

  it('does not rewrite at every line while large bodies are pending: only past twice what they take', async () => {
    const file = await openFile(1000);
    const body = 'x'.repeat(5000);
    await file.keepDelivery('large', { destination: 'https://hooks.example/large', signer: null, body });
    const afterLarge = statSync(path()).size;
    for (let i = 0; i < 5; i++) await file.keep(`run-${i}`, `https://hooks.example/${i}`);
    expect(statSync(path()).size).toBeGreaterThan(afterLarge);
  });
});
