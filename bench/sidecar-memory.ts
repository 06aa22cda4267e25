// What the pod's sidecar holds with a results store, and what was cut from it: a measurement made once, with its
// figures, written into every report as its own section (the memory scenario measures the figure each run).
import type { ReportSection } from './report.ts';

export const SIDECAR_MEMORY_SECTION: ReportSection = {
  title: 'Sidecar memory with a results store (measured on 2026-11-26)',
  lines: [
    '`npm run bench -- --scenarios sync,memory --rounds 1`, once on this branch\'s sidecar before its memory changes (b7c6d5d\'s sidecar with the shipper\'s metrics, which the bench waits on) and twice after, on this shared 2-core machine (load average 16–23). RSS after load is read once the collector has every record; a figure after load moves with the runs per second the load reached (the records on their way, the heap V8 grew meanwhile), which the machine\'s load moved by 4× between runs.',
    '',
    '| | before | after (two runs) |',
    '|---|---|---|',
    '| results sidecar RSS right after start | 82.6 MB | 76.4, 76.6 MB |',
    '| results sidecar RSS after the sync loads, records collected | 126.9 MB (at 4,293 runs/s) | 86.4 MB (at 1,281 runs/s), 102.6 MB (at 6,127 runs/s) |',
    '| of which anonymous (V8 heap, malloc) | 73.2 MB | 36.5, 52.6 MB |',
    '| of which the node binary\'s pages | 50.0 MB | 46.3, 46.4 MB |',
    '| results sidecar CPU per run, 32 connections | 93 µs | 123, 77 µs |',
    '| RunLog sidecar RSS right after start | 83.7 MB | 80.6, 81.0 MB |',
    '',
    'Cut: Node modules the sidecar loaded and never used. An ES module\'s `import … from \'node:http\'` builds the module\'s namespace from every export, and three (WebSocket, CloseEvent, MessageEvent) are getters that load Node\'s bundled undici with http2, tls, zlib and the web streams: 13 MB in an empty process; the sidecar now `require`s node:http (sidecar/node-http.ts, kube/transport.ts). prom-client\'s index loads its Pushgateway (https, tls, zlib), cluster aggregator, Summary and default metrics: 21 MB against 3 MB for the Registry, Counter, Gauge and Histogram the sidecar uses, now required one file each (sidecar/prom-client.ts). zlib loads on the first gzipped stream. The results shipper posts its batches over node:http rather than fetch (Node\'s undici again: 10–30 MB more RSS than node:http for the same 20 posts of 700 KB). sidecar/start-modules.test.ts fails if any of these is loaded at start again.',
    '',
    'The rest, after load: 46 MB are the node binary\'s own pages (an empty Node process holds 30 MB of them, the floor proxy 53 MB after the same loads: the platform\'s, shared, clean); of the anonymous memory, V8\'s heap was about 35 MB under this load against 21 MB at start (its live data 17 MB after a full collection, measured once before the cuts above: the rest is the old generation V8 grew for records that outlive two scavenges, each kept until its batch is collected, about a second, and not yet given back), and malloc and the socket buffers the rest. At start, 76 MB: the binary\'s pages (46 MB) and a 21 MB heap (8 MB of it the young generation\'s semi-spaces, 4 MB each by the pod\'s NODE_OPTIONS). 80 MB after load is therefore not reached: what is left is the Node platform\'s and the run records\' own, not modules. Tried with the harness and not taken: `MALLOC_ARENA_MAX=2` (no change after load, 123.6 against 124.1 MB), `--max-semi-space-size=2` (2 MB less at start, no change after load within the noise); `--max-old-space-size` and `--heap-growing-percent` were measured before (Sidecar Node flags, above) at +10 µs a run.',
  ],
};
