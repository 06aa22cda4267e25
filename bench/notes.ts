// Why a target was missed, told with the figures of the same run, for the report's Notes.
import type { FigureResult } from './report.ts';

export function explainMisses(results: FigureResult[], cores: number): string[] {
  const byKey = new Map(results.map((result) => [result.key, result]));
  const value = (key: string): number => byKey.get(key)?.median ?? Number.NaN;
  const missed = (key: string): boolean => byKey.get(key)?.met === false;
  const n = (x: number, decimals = 0): string => x.toFixed(decimals);
  const notes: string[] = [];

  if (missed('sync.throughputRatio')) {
    const runtime = value('sync.runtimeCpuUs');
    const nginx = value('sync.nginxCpuUs');
    // Were throughput set by CPU alone, the ratio is (runtime + nginx) / (runtime + sidecar), load generator aside.
    const budget = (runtime + nginx) / 0.6 - runtime;
    notes.push(
      `Sync throughput is bounded by CPU on ${cores} cores shared by the load generator, the runtime and the proxy: per request the sidecar spent ` +
        `${n(value('sync.sidecarCpuUs'))} µs against nginx's ${n(nginx)} µs, the runtime ${n(runtime)} µs per call. 0.6× nginx's throughput needs ` +
        `the proxy at about ${n(budget)} µs (load generator aside). fastify with the sidecar's runtime client and nothing else (no run id, record, ` +
        `admission, metrics or envelope) spent ${n(value('sync.floorCpuUs'))} µs and reached ${n(value('sync.floorRatio'), 2)}× nginx: ` +
        `that floor is Node's HTTP server and fastify, and leaves the sidecar's own work (${n(value('sync.sidecarCpuUs') - value('sync.floorCpuUs'))} µs) ` +
        `little room. The sidecar reached ${n(value('sync.throughputRatio') / value('sync.floorRatio'), 2)}× the floor's throughput.`,
    );
  }
  if (missed('sync.p99Ratio')) {
    notes.push(
      `p99 at 32 connections: with closed-loop load, latency is about connections ÷ throughput plus pauses, so a proxy at ` +
        `${n(value('sync.throughputRatio'), 2)}× nginx's throughput cannot keep its p99 (${n(value('sync.sidecarP99Ms'), 1)} ms) within 2× of ` +
        `nginx's (${n(value('sync.nginxP99Ms'), 1)} ms). Unloaded, the sidecar adds ${n(value('sync.p50AddedMs'), 3)} ms at p50 over a direct call.`,
    );
  }
  if (missed('memory.sidecarRssMb')) {
    notes.push(
      `Sidecar memory: an empty Node process is ${n(value('memory.nodeFloorRssMb'))} MB here, the sidecar ${n(value('memory.sidecarIdleRssMb'))} MB ` +
        `right after start (Node 24 stripping TypeScript types, ~17 MB of it, then fastify, undici, pino, prom-client, node:sqlite and its own code) ` +
        `and ${n(value('memory.sidecarRssMb'))} MB after the sync loads. The growth is V8's young generation, which Node sizes for this 24 GB ` +
        `machine: heap statistics taken during issue 7 showed it at 64 MB after start and 128 MB under load, with ~38 MB of live heap after a ` +
        `full collection (no leak). 80 MB is below what Node itself takes here; starting Node with --max-semi-space-size=8 (NODE_OPTIONS) ` +
        `kept a compiled sidecar near 180 MB after the same load instead of ~260 MB.`,
    );
  }
  if (missed('stream.sidecarEventsPerS')) {
    const direct = value('stream.directItemsPerS');
    notes.push(
      `One stream: read directly, the runtime produced ${n(direct)} items/s in this run (a worker drives a plain generator in turns of ` +
        `0.2 ms and hands each line to the event loop without waiting for it, one loop round trip per turn), and the sidecar carried ` +
        `${n(value('stream.rateRatio'), 2)}× of that, so ${direct < 20_000 ? 'the runtime' : 'the sidecar'} is what holds one stream ` +
        `below 20,000 events/s here; the first event reaches the client ${n(value('stream.firstItemMs'), 2)} ms after its yield.`,
    );
  }
  return notes;
}
