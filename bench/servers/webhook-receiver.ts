// The webhook scenario's receiver: verifies every delivery's signature (as README's receiver does), counts
// the distinct runs delivered, and tells the orchestrator what it saw.
//   node bench/servers/webhook-receiver.ts --secret S   → prints "listening on http://127.0.0.1:PORT"
//   GET /stats   → {"delivered", "duplicates", "badSignatures", "failures", "firstAtMs", "lastAtMs"}
//   POST /reset  → forgets everything
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { secret: { type: 'string' }, port: { type: 'string', default: '0' } } });
const secret = values.secret;
if (!secret) throw new Error('webhook-receiver: --secret is required');

let runs = new Set<string>();
let duplicates = 0;
let badSignatures = 0;
let failures = 0;
let firstAtMs: number | null = null;
let lastAtMs: number | null = null;

function signatureMatches(runId: string, timestamp: string, signature: string, rawBody: Buffer): boolean {
  const received = Buffer.from(signature.slice(signature.indexOf(',') + 1));
  const expected = Buffer.from(createHmac('sha256', secret!).update(`${runId}.${timestamp}.`).update(rawBody).digest('hex'));
  return received.length === expected.length && timingSafeEqual(received, expected);
}

function header(request: IncomingMessage, name: string): string {
  const value = request.headers[name];
  return typeof value === 'string' ? value : '';
}

async function receive(request: IncomingMessage, response: ServerResponse): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  const rawBody = Buffer.concat(chunks);

  if (request.method === 'GET' && request.url === '/stats') {
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify({ delivered: runs.size, duplicates, badSignatures, failures, firstAtMs, lastAtMs }));
    return;
  }
  if (request.method === 'POST' && request.url === '/reset') {
    runs = new Set();
    duplicates = badSignatures = failures = 0;
    firstAtMs = lastAtMs = null;
    response.writeHead(204).end();
    return;
  }

  const runId = header(request, 'x-request-id');
  if (!signatureMatches(runId, header(request, 'x-service-webhook-timestamp'), header(request, 'x-service-webhook-signature'), rawBody)) {
    badSignatures++;
    response.writeHead(401).end();
    return;
  }
  const delivery = JSON.parse(rawBody.toString('utf8')) as { run_id?: string; status?: string };
  if (delivery.run_id !== runId || delivery.status !== 'success') failures++;
  if (runs.has(runId)) duplicates++;
  runs.add(runId);
  const now = Date.now();
  firstAtMs ??= now;
  lastAtMs = now;
  response.writeHead(204).end();
}

const server = createServer((request, response) => {
  receive(request, response).catch((err: unknown) => {
    process.stderr.write(`webhook-receiver: ${(err as Error).stack ?? String(err)}\n`);
    if (!response.headersSent) response.writeHead(500);
    response.end();
  });
});
server.keepAliveTimeout = 30_000;
server.listen(Number(values.port), '127.0.0.1', () => {
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : values.port;
  process.stdout.write(`listening on http://127.0.0.1:${port}\n`);
});
// Nothing to flush: the counts live only as long as the run that reads them.
process.once('SIGTERM', () => process.exit(0));
