// A strict reader of the one request head the run port's front answers itself: `POST <path> HTTP/1.1` with
// plain headers, each once, and a body of a declared length. Whatever else a head holds — another method or
// version, chunked bodies, `Expect`, `Upgrade`, `Proxy-Connection`, a repeated header, folded lines, bytes
// outside printable ASCII, a missing Host — it does not judge: it returns null, and the connection goes to node:http, whose
// parser accepts, refuses or answers it as it would without the front. So the front only ever agrees with
// node:http, on a subset of what node:http reads.
import type { IncomingHttpHeaders } from 'node:http';

export interface RequestHead {
  url: string;
  /** Lower-case names. A null-prototype object: a header named `__proto__` is a header like any other. */
  headers: IncomingHttpHeaders;
  contentLength: number;
  /** False when the caller sent `Connection: close`. */
  keepAlive: boolean;
}

const REQUEST_LINE_START = 'POST /';
const REQUEST_LINE_END = ' HTTP/1.1';
/** Longer lengths than this many digits are left to node:http (a safe integer has 16). */
const MAX_LENGTH_DIGITS = 15;

/** RFC 9110 token characters (header names). */
const TOKEN_CHARS = charTable("!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz");
/** What the front accepts in a request target: RFC 3986 path and query characters, `%` escapes included. */
const TARGET_CHARS = charTable("!$&'()*+,-./0123456789:;=?@ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz~%");

function charTable(chars: string): Uint8Array {
  const table = new Uint8Array(128);
  for (let i = 0; i < chars.length; i++) table[chars.charCodeAt(i)] = 1;
  return table;
}

/**
 * Reads the head in `text` (latin1, without its closing blank line). Null when the head is not one the front
 * answers (see the top of this file); it may still be a valid request, for node:http to read.
 */
export function readRequestHead(text: string): RequestHead | null {
  const lineEnd = text.indexOf('\r\n');
  if (lineEnd === -1 || !text.startsWith(REQUEST_LINE_START) || !text.endsWith(REQUEST_LINE_END, lineEnd)) return null;
  const url = text.slice(REQUEST_LINE_START.length - 1, lineEnd - REQUEST_LINE_END.length);
  if (!isTarget(url)) return null;

  const headers: IncomingHttpHeaders = Object.create(null) as IncomingHttpHeaders;
  let contentLength = 0;
  let keepAlive = true;
  let hasHost = false;
  let start = lineEnd + 2;
  while (start < text.length) {
    let end = text.indexOf('\r\n', start);
    if (end === -1) end = text.length;
    const colon = text.indexOf(':', start);
    if (colon <= start || colon >= end || !isToken(text, start, colon)) return null;
    const value = headerValue(text, colon + 1, end);
    if (value === null) return null;
    const name = text.slice(start, colon).toLowerCase();
    if (headers[name] !== undefined) return null;
    switch (name) {
      case 'content-length':
        contentLength = decimal(value);
        if (contentLength < 0) return null;
        break;
      case 'connection': {
        const close = closesConnection(value);
        if (close === null) return null;
        keepAlive = !close;
        break;
      }
      case 'host':
        hasHost = true;
        break;
      case 'transfer-encoding':
      case 'expect':
      case 'upgrade':
      // llhttp reads it as it reads `Connection`.
      case 'proxy-connection':
        return null;
    }
    headers[name] = value;
    start = end + 2;
  }
  // node:http answers a missing Host with 400 (HTTP/1.1 requires one).
  if (!hasHost) return null;
  return { url, headers, contentLength, keepAlive };
}

function isTarget(url: string): boolean {
  for (let i = 0; i < url.length; i++) {
    const code = url.charCodeAt(i);
    if (code >= 128 || TARGET_CHARS[code] !== 1) return false;
  }
  return true;
}

function isToken(text: string, start: number, end: number): boolean {
  for (let i = start; i < end; i++) {
    const code = text.charCodeAt(i);
    if (code >= 128 || TOKEN_CHARS[code] !== 1) return false;
  }
  return true;
}

/** The value between `start` and `end`, without surrounding spaces and tabs; null if it holds other control or non-ASCII bytes. */
function headerValue(text: string, start: number, end: number): string | null {
  while (start < end && isBlank(text.charCodeAt(start))) start++;
  while (end > start && isBlank(text.charCodeAt(end - 1))) end--;
  for (let i = start; i < end; i++) {
    const code = text.charCodeAt(i);
    if ((code < 0x20 && code !== 0x09) || code > 0x7e) return null;
  }
  return text.slice(start, end);
}

function isBlank(code: number): boolean {
  return code === 0x20 || code === 0x09;
}

/** Digits only (no sign, no spaces inside, no list); -1 otherwise. */
function decimal(value: string): number {
  if (value.length === 0 || value.length > MAX_LENGTH_DIGITS) return -1;
  let result = 0;
  for (let i = 0; i < value.length; i++) {
    const digit = value.charCodeAt(i) - 0x30;
    if (digit < 0 || digit > 9) return -1;
    result = result * 10 + digit;
  }
  return result;
}

/** True for `close`, false for `keep-alive`; null for any other option list (left to node:http). */
function closesConnection(value: string): boolean | null {
  const option = value.toLowerCase();
  if (option === 'keep-alive') return false;
  if (option === 'close') return true;
  return null;
}
