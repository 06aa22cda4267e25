import { describe, expect, it } from 'vitest';
import { readRequestHead } from './request-head.ts';

const PLAIN = 'POST /v4/p/a/greet?async=true HTTP/1.1\r\nHost: sidecar:8080\r\nContent-Type: application/json\r\nContent-Length: 16';

describe('readRequestHead', () => {
  it('reads the common call: target, lower-case headers with trimmed values, length, kept alive', () => {
    const head = readRequestHead(PLAIN + '\r\nX-Webhook-Secret: \t s3cret \t');
    expect(head).not.toBeNull();
    expect(head!.url).toBe('/v4/p/a/greet?async=true');
    expect({ ...head!.headers }).toEqual({
      host: 'sidecar:8080',
      'content-type': 'application/json',
      'content-length': '16',
      'x-webhook-secret': 's3cret',
    });
    expect(head!.contentLength).toBe(16);
    expect(head!.keepAlive).toBe(true);
  });

  it('reads a call without a body, and Connection: close or keep-alive in any case', () => {
    expect(readRequestHead('POST /v4/p/a/f HTTP/1.1\r\nHost: x')).toMatchObject({ contentLength: 0, keepAlive: true });
    expect(readRequestHead('POST /v4/p/a/f HTTP/1.1\r\nHost: x\r\nConnection: Close')).toMatchObject({ keepAlive: false });
    expect(readRequestHead('POST /v4/p/a/f HTTP/1.1\r\nHost: x\r\nconnection: Keep-Alive')).toMatchObject({ keepAlive: true });
  });

  it('keeps percent-encoding and every query character in the target as sent', () => {
    const head = readRequestHead("POST /v4/my%20p/a/f?webhook=https%3A%2F%2Fh%2Fx&x=!$'()*+,;=:@~ HTTP/1.1\r\nHost: x");
    expect(head?.url).toBe("/v4/my%20p/a/f?webhook=https%3A%2F%2Fh%2Fx&x=!$'()*+,;=:@~");
  });

  it('holds a header named like an object property as a plain header', () => {
    const head = readRequestHead('POST / HTTP/1.1\r\nHost: x\r\n__proto__: polluted\r\nconstructor: c');
    expect(head?.headers['__proto__']).toBe('polluted');
    expect(head?.headers.constructor).toBe('c');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  // Each of these is left to node:http (null), which accepts, refuses or answers it as it always did.
  it.each([
    ['another method', 'GET /v4/p/a/f HTTP/1.1\r\nHost: x'],
    ['a lower-case method', 'post /v4/p/a/f HTTP/1.1\r\nHost: x'],
    ['HTTP/1.0', 'POST /v4/p/a/f HTTP/1.0\r\nHost: x'],
    ['an absolute-form target', 'POST http://x/v4/p/a/f HTTP/1.1\r\nHost: x'],
    ['a space in the target', 'POST /v4/p/a/f x HTTP/1.1\r\nHost: x'],
    ['a non-ASCII target', 'POST /v4/p/a/fé HTTP/1.1\r\nHost: x'],
    ['a quote in the target', 'POST /v4/p/a/f?x="y" HTTP/1.1\r\nHost: x'],
    ['two spaces after the method', 'POST  /v4/p/a/f HTTP/1.1\r\nHost: x'],
    ['no Host', 'POST /v4/p/a/f HTTP/1.1\r\nContent-Length: 2'],
    ['chunked', 'POST /v4/p/a/f HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked'],
    ['Expect: 100-continue', 'POST /v4/p/a/f HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2'],
    ['Upgrade', 'POST /v4/p/a/f HTTP/1.1\r\nHost: x\r\nUpgrade: websocket'],
    ['Proxy-Connection', 'POST /v4/p/a/f HTTP/1.1\r\nHost: x\r\nProxy-Connection: close'],
    ['a repeated header', 'POST /v4/p/a/f HTTP/1.1\r\nHost: x\r\nX-A: 1\r\nx-a: 2'],
    ['two lengths', 'POST /v4/p/a/f HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 2'],
    ['a length that is not digits', 'POST /v4/p/a/f HTTP/1.1\r\nHost: x\r\nContent-Length: +2'],
    ['a length list', 'POST /v4/p/a/f HTTP/1.1\r\nHost: x\r\nContent-Length: 2, 2'],
    ['an empty length', 'POST /v4/p/a/f HTTP/1.1\r\nHost: x\r\nContent-Length:'],
    ['a huge length', 'POST /v4/p/a/f HTTP/1.1\r\nHost: x\r\nContent-Length: 1234567890123456'],
    ['Connection with other options', 'POST /v4/p/a/f HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, Upgrade'],
    ['a folded line', 'POST /v4/p/a/f HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n  2'],
    ['a space before the colon', 'POST /v4/p/a/f HTTP/1.1\r\nHost : x'],
    ['a line without a colon', 'POST /v4/p/a/f HTTP/1.1\r\nHost: x\r\nnonsense'],
    ['a bare LF', 'POST /v4/p/a/f HTTP/1.1\r\nHost: x\nX-A: 1'],
    ['a control byte in a value', 'POST /v4/p/a/f HTTP/1.1\r\nHost: x\r\nX-A: a\u0000b'],
    ['a non-ASCII value', 'POST /v4/p/a/f HTTP/1.1\r\nHost: x\r\nX-A: caf\u00e9'],
    ['a separator in a name', 'POST /v4/p/a/f HTTP/1.1\r\nHost: x\r\nX(A): 1'],
    ['an empty header line', 'POST /v4/p/a/f HTTP/1.1\r\n\r\nHost: x'],
  ])('leaves %s to node:http', (_case, text) => {
    expect(readRequestHead(text)).toBeNull();
  });
});
