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
    '',
    'Measured on 2026-11-26 (second pass), on the compiled results sidecar as the bench starts it, loaded at a fixed 3,000 calls/s (autocannon, 32 connections, 1 s then 3 s) so that runs of different builds carry the same load on a shared machine, RSS read every 5 s after it. Three cuts:',
    '',
    '- **V8 did not give the load\'s heap back.** With Node 24, V8\'s memory reducer (which collects to shrink the heap once a process goes idle) never saw a low allocation rate: it counts the embedder (cppgc) heap\'s rate, which a process that never allocates there reports as exactly 0, read as the highest rate (V8 CL 5935313; `--trace-memory-reducer` printed `high alloc` every 8 s of idle). The heap stayed at its peak until a watchdog 100 s after the last full collection: 104–116 MB 30 s after the load. The sidecar now compiles a one-character vm.Script every 30 s (sidecar/memory-reducer-nudge.ts), which allocates on that heap; the reducer then collects about 10 s after the load: 78–84 MB 20 s after it (four runs; the same load without the nudge: 104–116 MB after 30 s). It does so once per growth of the heap, though: V8 starts a reducing cycle only after a full collection that grew the committed heap, so loads that return at the same size (the bench\'s rounds) find the heap already grown and keep it, about 98 MB between them in `make bench`.',
    '- **TypeBox.** The sidecar imported the run record\'s and App\'s schema modules for two constants (the run statuses, the largest kept result), and with them the schema library: about 200 modules, 1.7 MB of heap and 12 MB of RSS in a process that imports it alone. The constants now live in crds/run-record-values.ts and crds/app-limits.ts. RSS right after start: 69 MB, was 75.',
    '- **node:sqlite** is loaded only by a sidecar that keeps its runs in SQLite.',
    '',
    'Tried and not taken: `--memory-saver-mode` (a command-line V8 flag; NODE_OPTIONS does not take it): 83–87 MB right after the load, but 15–25% more CPU per run at the same rate; jemalloc (LD_PRELOAD): 5 MB more at start, the same settled; `MALLOC_MMAP_THRESHOLD_`, `MALLOC_ARENA_MAX=1`: no difference beyond the noise (±3 MB). What remains right after a load (90–110 MB) is V8\'s heap grown for it, given back as above; settled, 46 MB are the node binary\'s pages, 11 MB V8\'s heap and 10 MB malloc.',
  ],
};
