// One bounded GET of a small JSON answer on a keep-alive agent: how the leader reads the load of a replica's
// sidecar (load-scraper.ts) and of an activator (activator-loads.ts). Bounded by a timeout and a body limit,
// so a stuck or hostile peer costs one socket and a few kilobytes, never the scaler's loop.
import { request, type Agent, type IncomingMessage } from 'node:http';
import type { ReplicaAddress } from '../replica-address.ts';

export interface ScrapeRequest {
  agent: Agent;
  address: ReplicaAddress;
  path: string;
  timeoutMs: number;
  maxBytes: number;
}

/** The answer's body, when it is a 200 within the limits; otherwise rejects saying which limit, or the status. */
export function scrapeGet({ agent, address, path, timeoutMs, maxBytes }: ScrapeRequest): Promise<string> {
  return new Promise((resolve, reject) => {
    const outgoing = request({ host: address.host, port: address.port, path, method: 'GET', agent, timeout: timeoutMs }, (answer: IncomingMessage) => {
      if (answer.statusCode !== 200) {
        answer.resume();
        reject(new Error(`answered ${answer.statusCode}`));
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      answer.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > maxBytes) {
          reject(new Error(`answered more than ${maxBytes} bytes`));
          // Without an error: the connection is dropped, the promise already says why.
          answer.removeAllListeners('data');
          outgoing.destroy();
          return;
        }
        chunks.push(chunk);
      });
      answer.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
      answer.on('error', reject);
    });
    outgoing.on('timeout', () => outgoing.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    outgoing.on('error', reject);
    outgoing.end();
  });
}
