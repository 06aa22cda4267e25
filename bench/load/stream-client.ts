// Reads one stream of the benchmarks' `ticks` generator and times it: when its first item arrived, measured
// against the wall-clock time the generator stamped on it at the yield, and how fast the rest followed.
// Reads either framing: SSE from the sidecar, or the runtime's own lines (runtime/python/PROTOCOL.md).
import { Agent, request } from 'node:http';

export type StreamFraming = 'sse' | 'runtime-lines';

export interface StreamTiming {
  /** From the yield of the first item to its arrival here, in ms (both read from the wall clock). */
  firstItemMs: number;
  items: number;
  /** From sending the request to the end of the stream. */
  totalMs: number;
}

const agent = new Agent({ keepAlive: true, maxSockets: 64 });

/** Wall-clock now in ms with sub-millisecond resolution (Date.now() has whole milliseconds). */
function wallClockMs(): number {
  return performance.timeOrigin + performance.now();
}

export function readStream(url: string, body: string, framing: StreamFraming): Promise<StreamTiming> {
  const headers: Record<string, string> = { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) };
  if (framing === 'sse') headers.accept = 'text/event-stream';
  else headers['x-runlet-stream'] = '1';
  // An SSE event ends with a blank line; a runtime line with a newline (its last line, `d`, is no item).
  const separator = framing === 'sse' ? '\n\n' : '\n';
  const trailingLines = framing === 'sse' ? 0 : 1;

  return new Promise((resolve, reject) => {
    const sentAt = performance.now();
    const call = request(url, { method: 'POST', headers, agent }, (response) => {
      if (response.statusCode !== 200) {
        response.resume();
        reject(new Error(`stream ${url} answered HTTP ${response.statusCode}`));
        return;
      }
      response.setEncoding('utf8');
      let firstItemMs: number | null = null;
      let head = '';
      let separators = 0;
      let lastChunk = '';
      response.on('data', (chunk: string) => {
        if (firstItemMs === null) {
          const arrivedAt = wallClockMs();
          head += chunk;
          const end = head.indexOf(separator);
          if (end !== -1) firstItemMs = arrivedAt - firstItemStamp(head.slice(0, end), framing);
        }
        separators += countOf(chunk, separator);
        // A blank line split across two chunks (the events here never hold more than two newlines in a row).
        if (separator.length === 2 && lastChunk.endsWith('\n') && !lastChunk.endsWith('\n\n') && chunk.startsWith('\n')) separators++;
        lastChunk = chunk;
      });
      response.on('end', () => {
        if (firstItemMs === null) {
          reject(new Error(`stream ${url} ended before its first item`));
          return;
        }
        resolve({ firstItemMs, items: separators - trailingLines, totalMs: performance.now() - sentAt });
      });
      response.on('error', reject);
    });
    call.on('error', reject);
    call.end(body);
  });
}

/** The `t` (seconds) the generator put on the first item, in ms. */
function firstItemStamp(firstEvent: string, framing: StreamFraming): number {
  const json = framing === 'sse' ? firstEvent.slice('data: '.length) : firstEvent.slice(1);
  const item = JSON.parse(json) as { t?: unknown };
  if (typeof item.t !== 'number') throw new Error(`the first stream item has no time stamp: ${firstEvent}`);
  return item.t * 1000;
}

function countOf(text: string, separator: string): number {
  let count = 0;
  for (let at = text.indexOf(separator); at !== -1; at = text.indexOf(separator, at + separator.length)) count++;
  return count;
}

export function closeStreamClient(): void {
  agent.destroy();
}
