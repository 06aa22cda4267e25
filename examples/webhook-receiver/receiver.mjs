// A webhook receiver that verifies Runlet's signature. No dependencies.
//   node receiver.mjs --port 9000 --secret "$WEBHOOK_SECRET"
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';

// Each attempt is signed as it is sent: a timestamp further than this from now is a replay of a captured
// delivery (or a clock far off), refused even though its signature is genuine.
const TOLERANCE_SECONDS = 5 * 60;

export function verifySignature(secret, requestId, timestamp, signature, rawBody) {
  if (!/^[0-9]+$/.test(timestamp) || Math.abs(Date.now() / 1000 - Number(timestamp)) > TOLERANCE_SECONDS) return false;
  const received = signature.includes(',') ? signature.slice(signature.indexOf(',') + 1) : signature;
  const expected = createHmac('sha256', secret).update(`${requestId}.${timestamp}.`).update(rawBody).digest('hex');
  return received.length === expected.length && timingSafeEqual(Buffer.from(received), Buffer.from(expected));
}

const { values } = parseArgs({ options: { port: { type: 'string', default: '9000' }, secret: { type: 'string' } } });
const server = createServer(async (request, response) => {
  const chunks = [];
  for await (const chunk of request) chunks.push(chunk);
  const rawBody = Buffer.concat(chunks);
  const ok = verifySignature(
    values.secret,
    request.headers['x-request-id'] ?? '',
    request.headers['x-service-webhook-timestamp'] ?? '',
    request.headers['x-service-webhook-signature'] ?? '',
    rawBody,
  );
  if (!ok) return response.writeHead(401).end();
  const delivery = JSON.parse(rawBody.toString('utf8'));
  // Deliveries can repeat: handle each run_id once (idempotent receiver).
  console.log(`verified run ${delivery.run_id} ${delivery.status}`);
  response.writeHead(204).end();
});
server.listen(Number(values.port), '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${server.address().port}`));
