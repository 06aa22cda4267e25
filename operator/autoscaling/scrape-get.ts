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

/**
 * The answer's body, when it is a 200 within the limits; otherwise rejects saying which limit, or the status.
 * The timeout bounds the whole exchange, not the socket's idle time: a peer trickling a byte at a time is cut off
 * as one that never answers is. A connection given up on is dropped, never drained: the agent's one socket for
 * the peer would otherwise stay taken for as long as the peer keeps talking.
 */
export function scrapeGet({ agent, address, path, timeoutMs, maxBytes }: ScrapeRequest): Promise<string> {
  let deadline: NodeJS.Timeout | undefined;
  return new Promise<string>((resolve, reject) => {
    const outgoing = request({ host: address.host, port: address.port, path, method: 'GET', agent }, (answer: IncomingMessage) => {
      if (answer.statusCode !== 200) {
        giveUp(new Error(`answered ${answer.statusCode}`));
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      answer.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > maxBytes) giveUp(new Error(`answered more than ${maxBytes} bytes`));
        else chunks.push(chunk);
      });
      answer.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
      answer.on('error', reject);
    });
    // Rejected first, then dropped without an error: the promise already says why.
    const giveUp = (error: Error): void => {
      reject(error);
      outgoing.destroy();
    };
    deadline = setTimeout(() => giveUp(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    outgoing.on('error', reject);
    outgoing.end();
  }).finally(() => clearTimeout(deadline));
}
