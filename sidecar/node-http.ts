// node:http and node:https for the sidecar, required rather than imported. An ES module's `import … from
// 'node:http'` builds the module's namespace from every export, and three of them (WebSocket, CloseEvent,
// MessageEvent) are getters that load Node's bundled undici, and with it http2, tls, zlib, worker_threads and
// the web streams: 13 MB of the sidecar's RSS (Node 24.21; its target is 80 MB), for nothing it uses. require()
// reads only the exports asked for. node:https (tls, OpenSSL's contexts: 4.5 MB more) loads on first use, for a
// collector or an API server reached over TLS. Types still come from `import type`, which leaves no import.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

export const http = require('node:http') as typeof import('node:http');

let https: typeof import('node:https') | undefined;

export function nodeHttps(): typeof import('node:https') {
  https ??= require('node:https') as typeof import('node:https');
  return https;
}
