// autocannon as a load generator, run in the orchestrator's process: for throughput figures where whole
// milliseconds of latency resolution do not matter, and for runs of a fixed number of requests.
import autocannon from 'autocannon';
import type { LoadResult } from './result.ts';

const REQUEST_TIMEOUT_S = 10;

export interface AutocannonLoad {
  url: string;
  connections: number;
  /** Run for this many seconds, or until `amount` requests have been answered. */
  durationS?: number;
  amount?: number;
  /** Requests a second over all connections (default: as fast as they are answered). */
  overallRate?: number;
  body?: string;
  headers?: Record<string, string>;
}

export async function runAutocannon(load: AutocannonLoad): Promise<LoadResult & { ok: number }> {
  const result = await autocannon({
    url: load.url,
    connections: load.connections,
    ...(load.amount === undefined ? { duration: load.durationS ?? 3 } : { amount: load.amount }),
    ...(load.overallRate === undefined ? {} : { overallRate: load.overallRate }),
    method: 'POST',
    body: load.body ?? '{}',
    headers: { 'content-type': 'application/json', ...load.headers },
    timeout: REQUEST_TIMEOUT_S,
  });
  const seconds = (result.finish.getTime() - result.start.getTime()) / 1000;
  return {
    tool: 'autocannon',
    requests: result.requests.total,
    perSecond: result.requests.total / seconds,
    seconds,
    errors: result.errors + result.timeouts + result.non2xx,
    latencyMs: null,
    ok: result['2xx'],
  };
}
