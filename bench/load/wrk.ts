// wrk as a load generator: a C client with microsecond latency percentiles, so it is the tool wherever a figure
// is a latency. One thread, to leave the machine's other core to the servers it measures.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { LoadResult } from './result.ts';

const REPORT_SCRIPT = fileURLToPath(new URL('../servers/wrk-report.lua', import.meta.url));
const REQUEST_TIMEOUT = '10s';

export interface WrkOptions {
  url: string;
  connections: number;
  /** Whole seconds (wrk's unit). */
  durationS: number;
  body?: string;
  headers?: Record<string, string>;
}

interface WrkReport {
  requests: number;
  durationUs: number;
  errors: { connect: number; read: number; write: number; status: number; timeout: number };
  latencyUs: { p50: number; p90: number; p99: number; max: number; mean: number };
}

export async function runWrk(options: WrkOptions): Promise<LoadResult> {
  const args = ['-t1', `-c${options.connections}`, `-d${options.durationS}s`, '--timeout', REQUEST_TIMEOUT, '-s', REPORT_SCRIPT, options.url];
  const env = {
    ...process.env,
    BENCH_BODY: options.body ?? '{}',
    BENCH_HEADERS: Object.entries(options.headers ?? {})
      .map(([name, value]) => `${name}: ${value}`)
      .join('\n'),
  };
  const stdout = await new Promise<string>((resolve, reject) => {
    execFile('wrk', args, { env, timeout: (options.durationS + 30) * 1000 }, (err, out, errOut) => {
      if (err) reject(new Error(`wrk ${args.join(' ')} failed: ${err.message}\n${errOut}`));
      else resolve(out);
    });
  });
  const line = stdout.split('\n').find((text) => text.startsWith('BENCH_RESULT '));
  if (!line) throw new Error(`wrk printed no BENCH_RESULT line for ${options.url}:\n${stdout}`);
  const report = JSON.parse(line.slice('BENCH_RESULT '.length)) as WrkReport;
  const seconds = report.durationUs / 1e6;
  const { connect, read, write, status, timeout } = report.errors;
  return {
    tool: 'wrk',
    requests: report.requests,
    perSecond: report.requests / seconds,
    seconds,
    errors: connect + read + write + status + timeout,
    latencyMs: {
      p50: report.latencyUs.p50 / 1000,
      p90: report.latencyUs.p90 / 1000,
      p99: report.latencyUs.p99 / 1000,
      max: report.latencyUs.max / 1000,
      mean: report.latencyUs.mean / 1000,
    },
  };
}
