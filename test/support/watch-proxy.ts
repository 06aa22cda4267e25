// An HTTP proxy in front of the fake API server, for what the server itself cannot do to a watch:
// - make the watches open right now die silently: the connection stays open, the server keeps sending, and
//   nothing more reaches the client — no event, no bookmark, no end, no error (a dropped NAT entry, a stuck
//   load balancer);
// - hold new watch requests back while the test changes things, so the client comes back to a world that
//   moved on without it (and, after a compaction, to 410 Gone).
import { createServer, request, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { AddressInfo } from 'node:net';

export interface WatchProxy {
  url: string;
  /** Silences every watch open now; later requests pass normally. Returns how many. */
  silenceOpenWatches(): number;
  /** Watches open through the proxy now (not silenced). */
  readonly openWatches: number;
  /** New watch requests wait until `releaseWatches()`; other requests pass. */
  holdWatches(): void;
  releaseWatches(): void;
  /** Watch requests waiting in `holdWatches()`. */
  readonly heldWatches: number;
  close(): Promise<void>;
}

/** In front of `target`; an https target is verified with `ca` (PEM). Clients speak plain HTTP to the proxy. */
export async function startWatchProxy(target: string, ca?: string): Promise<WatchProxy> {
  const openWatches = new Set<{ silenced: boolean }>();
  const held: (() => void)[] = [];
  let holding = false;

  const forward = (req: IncomingMessage, res: ServerResponse, isWatch: boolean): void => {
    const send = target.startsWith('https:') ? httpsRequest : request;
    const upstream = send(`${target}${req.url}`, { method: req.method, headers: { ...req.headers, host: new URL(target).host } as IncomingHttpHeaders, ca }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      const stream = { silenced: false };
      if (isWatch) openWatches.add(stream);
      answer.on('data', (chunk: Buffer) => {
        if (!stream.silenced) res.write(chunk);
      });
      answer.on('end', () => {
        openWatches.delete(stream);
        if (!stream.silenced) res.end();
      });
      // The server reset the connection: so does the proxy, unless this stream plays dead.
      answer.on('close', () => {
        openWatches.delete(stream);
        if (!answer.complete && !stream.silenced) res.destroy();
      });
    });
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  };

  const server = createServer((req, res) => {
    const isWatch = /[?&]watch=(true|1)/.test(req.url ?? '');
    if (isWatch && holding) held.push(() => forward(req, res, true));
    else forward(req, res, isWatch);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    get openWatches() {
      return openWatches.size;
    },
    silenceOpenWatches() {
      for (const stream of openWatches) stream.silenced = true;
      const count = openWatches.size;
      openWatches.clear();
      return count;
    },
    holdWatches() {
      holding = true;
    },
    releaseWatches() {
      holding = false;
      for (const release of held.splice(0)) release();
    },
    get heldWatches() {
      return held.length;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
