// The front's request-head reader against llhttp, node:http's parser, as the reference: for generated heads
// (mostly plausible calls, with the corner cases request smuggling lives on mixed in), whenever the front
// reads a head, node:http must accept it too, with the same target, headers, keep-alive and body framing.
// node:http is asked over a real socket, as a caller would: the head, the body of the length the front read,
// and a second request behind it that node:http must find where the front says the first one ends.
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RawConnection, type RawAnswer } from '../../test/support/raw-http.ts';
import { MAX_HEAD_BYTES } from './front-connection.ts';
import { readRequestHead, type RequestHead } from './request-head.ts';

/** What node:http read of a request, as its echo answers it. */
interface NodeReading {
  url: string;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  keepAlive: boolean;
}

const NEXT_REQUEST = 'GET /next HTTP/1.1\r\nHost: n\r\nConnection: close\r\n\r\n';
/** A disagreement can leave node:http waiting for bytes that never come: the case fails after this long. */
const ANSWER_BOUND_MS = 5_000;

let server: Server;
let origin: string;

beforeAll(async () => {
  server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const reading: NodeReading = {
        url: request.url ?? '',
        headers: { ...request.headers },
        body: Buffer.concat(chunks).toString('latin1'),
        keepAlive: response.shouldKeepAlive,
      };
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify(reading));
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  server.close();
  await once(server, 'close');
});

// --- Generated heads -----------------------------------------------------------------------------------------

const TOKEN = "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const TARGET = "!$&'()*+,-./0123456789:;=?@ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz~%";
/** Characters llhttp treats differently from the common ones: separators, controls, DEL, obs-text. */
const ODD = ' \t"#<>[\\]^`{|}()/,;=?@\u0000\u0001\u000b\u000c\u007f\u0080\u00e9\u00ff';

const fromChars = (chars: string, maxLength: number) =>
  fc.array(fc.constantFrom(...chars), { maxLength }).map((list) => list.join(''));
/** Mostly `common`, sometimes with odd characters mixed in. */
const text = (common: string, maxLength: number) =>
  fc.oneof({ weight: 12, arbitrary: fromChars(common, maxLength) }, { weight: 1, arbitrary: fromChars(common + ODD, maxLength) });

const requestLine = fc.oneof(
  { weight: 12, arbitrary: text(TARGET, 30).map((target) => `POST /${target} HTTP/1.1`) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      'GET / HTTP/1.1',
      'post / HTTP/1.1',
      'POST / HTTP/1.0',
      'POST / HTTP/2.0',
      'POST  / HTTP/1.1',
      'POST / HTTP/1.1 ',
      'POST /a#b HTTP/1.1',
      'POST http://h/ HTTP/1.1',
      'POST * HTTP/1.1',
      ' POST / HTTP/1.1',
    ),
  },
);

const contentLengthValue = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 0, max: 300 }).map(String) },
  { weight: 1, arbitrary: fc.constantFrom('007', '00', '+1', '-1', '1 2', '1,1', '1, 1', ' 3 ', '0x10', '', '1.0', '99999999999999999999', '1e3') },
);

const headerName = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.constantFrom(
      'Host',
      'Content-Type',
      'X-Webhook-Secret',
      'Authorization',
      'Accept',
      'Connection',
      'Keep-Alive',
      'Transfer-Encoding',
      'Expect',
      'Upgrade',
      'Proxy-Connection',
      'TE',
      'Trailer',
      'Content-Encoding',
      '__proto__',
    ),
  },
  { weight: 2, arbitrary: text(TOKEN, 12) },
);

const headerValue = fc.oneof(
  { weight: 6, arbitrary: text(TOKEN + ' ,;=/"', 24) },
  { weight: 1, arbitrary: fc.constantFrom('close', 'Close', 'keep-alive', 'Keep-Alive', 'keep-alive, close', 'close, close', 'upgrade', 'chunked', 'Chunked', 'gzip, chunked', 'chunked, identity', '100-continue', '') },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 6000 }).map((length) => 'v'.repeat(length)) },
);

/** One header line, plain or one of the ways a line can be malformed or ambiguous. */
const headerLine = fc.oneof(
  { weight: 30, arbitrary: fc.tuple(headerName, fc.constantFrom(':', ': ', ':\t', ':  '), headerValue).map(([name, colon, value]) => name + colon + value) },
  { weight: 8, arbitrary: fc.tuple(fc.constantFrom('Content-Length', 'content-length', 'CONTENT-LENGTH'), contentLengthValue).map(([name, value]) => `${name}: ${value}`) },
  {
    weight: 4,
    arbitrary: fc
      .tuple(fc.constantFrom('Connection', 'connection', 'Proxy-Connection', 'Keep-Alive'), fc.constantFrom('close', 'Close', 'keep-alive', 'Keep-Alive', 'keep-alive, close', 'upgrade', ''))
      .map(([name, value]) => `${name}: ${value}`),
  },
  { weight: 1, arbitrary: fc.tuple(headerName, headerValue).map(([name, value]) => `${name} : ${value}`) },
  { weight: 1, arbitrary: headerValue.map((value) => ` ${value}`) },
  { weight: 1, arbitrary: headerValue.map((value) => `\t${value}`) },
  { weight: 1, arbitrary: fc.constantFrom(': empty name', 'no colon here', 'X-A: a\nX-B: b', 'X-A: a\rb', 'X-A: trailing ') },
);

const lineEnd = fc.oneof({ weight: 60, arbitrary: fc.constant('\r\n') }, { weight: 1, arbitrary: fc.constantFrom('\n', '\r', '\r\r\n') });

/** A head without its closing blank line: a request line, usually a Host, then the generated header lines. */
const head = fc
  .tuple(requestLine, fc.boolean(), fc.array(fc.tuple(headerLine, lineEnd), { maxLength: 6 }), fc.integer({ min: 0, max: 8 }), lineEnd)
  .map(([line, withHost, headers, hostAt, firstEnd]) => {
    const lines = headers.map(([text, end]) => text + end);
    if (withHost) lines.splice(Math.min(hostAt, lines.length), 0, 'Host: h\r\n');
    return (line + firstEnd + lines.join('')).replace(/(\r\n|\n|\r)$/, '');
  });

// --- The comparison ------------------------------------------------------------------------------------------

async function bounded<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`node:http gave no ${what} within ${ANSWER_BOUND_MS} ms`)), ANSWER_BOUND_MS)));
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** What node:http makes of the head, the body the front would take, and (kept alive) a next request. */
async function askNode(headText: string, read: RequestHead, body: string): Promise<{ first: RawAnswer; next: RawAnswer | null }> {
  const connection = await RawConnection.open(origin);
  try {
    connection.write(Buffer.from(headText + '\r\n\r\n' + body + (read.keepAlive ? NEXT_REQUEST : ''), 'latin1'));
    const first = await bounded(connection.next(), 'answer');
    const next = read.keepAlive ? await bounded(connection.next(), 'answer to the next request') : null;
    return { first, next };
  } finally {
    connection.close();
  }
}

/**
 * The front's headers as node:http's would read: node:http's headers object is a plain one, on which a header
 * named `__proto__` is lost (the front's keeps it, and nothing reads it).
 */
function comparable(front: RequestHead): Record<string, unknown> {
  const headers: Record<string, unknown> = { ...front.headers };
  delete headers['__proto__'];
  return headers;
}

describe('readRequestHead against llhttp', () => {
  it('reads nothing llhttp refuses or reads otherwise: target, headers, keep-alive and body framing agree', async () => {
    let read = 0;
    let refused = 0;
    await fc.assert(
      fc.asyncProperty(head, async (headText) => {
        // What the front reads: a head it holds whole (longer ones go to node:http unread), read by readRequestHead.
        const front = Buffer.byteLength(headText, 'latin1') <= MAX_HEAD_BYTES ? readRequestHead(headText) : null;
        if (front === null) {
          refused++;
          return;
        }
        read++;
        const body = 'b'.repeat(front.contentLength);
        const { first, next } = await askNode(headText, front, body);
        expect(first.status).toBe(200);
        expect(JSON.parse(first.body) as NodeReading).toEqual({ url: front.url, headers: comparable(front), body, keepAlive: front.keepAlive });
        if (next !== null) expect(JSON.parse(next.body)).toMatchObject({ url: '/next' });
      }),
      { numRuns: 1000 },
    );
    // Both outcomes are exercised, or the property says little.
    expect(read).toBeGreaterThan(100);
    expect(refused).toBeGreaterThan(100);
  });

  // llhttp's own corner cases, each refused by the front (null) whatever llhttp makes of it.
  it.each([
    ['obs-fold', 'POST / HTTP/1.1\r\nHost: h\r\nX-A: a\r\n b'],
    ['a bare LF', 'POST / HTTP/1.1\nHost: h'],
    ['two Content-Lengths', 'POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 1'],
    ['Content-Length and chunked', 'POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nTransfer-Encoding: chunked'],
    ['a space before the colon', 'POST / HTTP/1.1\r\nHost: h\r\nContent-Length : 1'],
    ['Proxy-Connection', 'POST / HTTP/1.1\r\nHost: h\r\nProxy-Connection: close'],
  ])('leaves %s to node:http', (_case, headText) => {
    expect(readRequestHead(headText)).toBeNull();
  });
});
