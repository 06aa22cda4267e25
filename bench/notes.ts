// Why a target was missed, told with the figures of the same run, for the report's Notes.
import type { FigureResult } from './report.ts';

export function explainMisses(results: FigureResult[], cores: number): string[] {
  const byKey = new Map(results.map((result) => [result.key, result]));
  const value = (key: string): number => byKey.get(key)?.median ?? Number.NaN;
  const missed = (key: string): boolean => byKey.get(key)?.met === false;
  const n = (x: number, decimals = 0): string => x.toFixed(decimals);
  const notes: string[] = [];

  if (missed('sync.throughputRatio')) {
    const runtime = value('sync.runtimeBehindNginxCpuUs');
    const nginx = value('sync.nginxCpuUs');
    // Were throughput set by CPU alone, the ratio is (runtime + nginx) / (runtime + sidecar), load generator aside.
    const budget = (runtime + nginx) / 0.6 - value('sync.runtimeBehindSidecarCpuUs');
    notes.push(
      `Sync throughput is bounded by CPU on ${cores} cores shared by the load generator, the runtime and the proxy: per request the sidecar spent ` +
        `${n(value('sync.sidecarCpuUs'))} µs against nginx's ${n(nginx)} µs, and the runtime ${n(value('sync.runtimeBehindSidecarCpuUs'))} µs per call ` +
        `behind the sidecar against ${n(runtime)} µs behind nginx (${n(value('sync.runtimeCpuUs'))} µs called directly, ` +
        `${n(value('sync.runtimeBehindFloorCpuUs'))} µs behind the floor proxy below: the pace of the calls, not their content, sets it; a runtime ` +
        `called at a slower pace wakes its event loop and worker threads for fewer calls at a time). 0.6× nginx's throughput needs the sidecar at about ` +
        `${n(budget)} µs (load generator aside). The sidecar reads the common call with its own HTTP/1.1 front, not node:http: a node:http server ` +
        `with the same runtime client and nothing else (the floor: no run id, record, admission, metrics or envelope) spent ` +
        `${n(value('sync.floorCpuUs'))} µs and reached ${n(value('sync.floorRatio'), 2)}× nginx. A CPU profile of the compiled sidecar under this ` +
        `load (node --cpu-prof) puts about 40% of its time in its two socket writes per call (the kernel's loopback TCP, and waking the reader), ` +
        `5% in GC, and the rest spread over its JavaScript with no function above 2%. Recording runs in SQLite instead of the RunLog, the ` +
        `sidecar spent ${n(value('sync.sqliteCpuUs'))} µs per run and reached ${n(value('sync.sqliteRatio'), 2)}× nginx; the in-memory API server ` +
        `spent ${n(value('sync.kubeApiCpuUs'))} µs per run on the RunLog's writes, on the same cores here and on the control plane in a cluster.`,
    );
  }
  if (missed('sync.p99Ratio')) {
    const meanRatio = value('sync.nginxRps') / value('sync.sidecarRps');
    notes.push(
      `p99 at 32 connections: with closed-loop load, mean latency is connections ÷ throughput, so at ${n(value('sync.throughputRatio'), 2)}× ` +
        `nginx's throughput the sidecar's mean is ${n(meanRatio, 2)}× nginx's before any pause; its p99 (${n(value('sync.sidecarP99Ms'), 1)} ms) ` +
        `was ${n(value('sync.p99Ratio'), 2)}× nginx's (${n(value('sync.nginxP99Ms'), 1)} ms). The rest is the tail a garbage-collected event loop adds ` +
        `and nginx does not have: under this load (\`--trace-gc\`, measured once) the sidecar scavenges its young generation for 1–2.5 ms ` +
        `every 30–40 ms and finishes an old-space collection with a 4–6 ms pause every few seconds, and the calls in flight during a pause all ` +
        `wait for it. Unloaded, the sidecar adds ${n(value('sync.p50AddedMs'), 3)} ms at p50 over a direct call. Each sidecar's sync load ` +
        `here also comes after a minute or more of idle (the other scenarios run in between), so it starts on the heap the sidecar's idle ` +
        `collection shrank to its floor (sidecar/idle-collection.ts), which V8 grows back under the load: measured the same day with ` +
        `\`--scenarios sync,memory --rounds 3\`, the pod's sidecar's p99 was 1.56× nginx's without the idle collection and 2.42× with it, ` +
        `its throughput 0.61× and 0.57×, its RSS once idle 92 and 77 MB. The target on RSS is #24's; this p99 is what a burst after ` +
        `15 s of idle pays for it.`,
    );
  }
  if (missed('memory.resultsSidecarSettledRssMb')) {
    notes.push(
      `Sidecar memory: an empty Node process is ${n(value('memory.nodeFloorRssMb'))} MB here, the pod's sidecar with a results store ` +
        `${n(value('memory.resultsSidecarIdleRssMb'))} MB right after start, ${n(value('memory.resultsSidecarRssMb'))} MB right after the sync loads ` +
        `and ${n(value('memory.resultsSidecarSettledRssMb'))} MB once idle 30 s (the sidecar collects 15 s after a busy period, and jemalloc returns the freed pages) ` +
        `(the RunLog one, with its window of 200 records, ${n(value('memory.sidecarRssMb'))} MB). The floor proxy (node:http and the runtime ` +
        `client, nothing else, the same NODE_OPTIONS) was at ${n(value('memory.floorProxyRssMb'))} MB after the same loads. The sidecar's own ` +
        `share is the difference to the floor (its modules, metrics, the records on their way to the collector). It loads no web framework, ` +
        `Kubernetes client, YAML parser, JWT library or HTTP client library unless it needs one (fastify only to build the OpenAPI document on ` +
        `request; its batches go to the collector over node:http, not fetch, whose bundled undici is ~13 MB).`,
    );
    notes.push(
      `Where that memory is (/proc/<pid>/smaps, Rss by mapping): of the results sidecar's ${n(value('memory.resultsSidecarRssMb'))} MB after the ` +
        `sync loads, ${n(value('memory.resultsSidecarBinaryMb'))} MB are pages of the node binary itself and ` +
        `${n(value('memory.resultsSidecarAnonymousMb'))} MB anonymous memory (${n(value('memory.resultsSidecarOtherMb'))} MB the rest); the ` +
        `floor proxy's are ${n(value('memory.floorProxyBinaryMb'))} and ${n(value('memory.floorProxyAnonymousMb'))} MB, the empty Node ` +
        `process's ${n(value('memory.nodeFloorBinaryMb'))} and ${n(value('memory.nodeFloorAnonymousMb'))} MB. The binary's pages are the ` +
        `platform's: its code and read-only data, which a server running under load touches more of than an empty process (V8's optimizing ` +
        `compilers, OpenSSL, ICU data); they are clean, shared with every Node process on the machine, and the kernel can drop them and read ` +
        `them back from the file. The anonymous memory is the process's own: V8's young generation (its semi-spaces, capped by the sidecar's ` +
        `NODE_OPTIONS) and the old space as it grows under load, and malloc. ` +
        (value('memory.floorProxyRssMb') > 80
          ? `A Node 24 server that has run its hot paths through the JIT here holds the binary's pages plus that heap, as the floor proxy's ` +
            `${n(value('memory.floorProxyRssMb'))} MB show with none of the sidecar's work, so 80 MB is below what such a server reaches here; `
          : `The floor proxy, with none of the sidecar's work, stayed within 80 MB (${n(value('memory.floorProxyRssMb'))} MB), so the excess is ` +
            `the sidecar's own; `) +
        `the results sidecar's anonymous memory is ${n(value('memory.resultsSidecarAnonymousMb') - value('memory.floorProxyAnonymousMb'))} MB above the floor's.`,
    );
  }
  if (missed('sync.sqliteRatio') || missed('sync.sqliteP99Ratio')) {
    notes.push(
      `The SQLite sidecar (\`--run-store sqlite\`) commits its records on a writer thread, a batch at a time, so neither a commit nor the ` +
        `checkpoint SQLite runs inside one (an fsync) stops its event loop; the thread's CPU comes out of the same ${cores} cores as the ` +
        `runtime's and the load generator's. It spent ${n(value('sync.sqliteCpuUs'))} µs per run, all threads, against the pod's ` +
        `sidecar's ${n(value('sync.sidecarCpuUs'))} µs, and reached ${n(value('sync.sqliteRatio'), 2)}× nginx's throughput with a p99 of ` +
        `${n(value('sync.sqliteP99Ms'), 1)} ms (${n(value('sync.sqliteP99Ratio'), 2)}× nginx's ${n(value('sync.nginxP99Ms'), 1)} ms).`,
    );
  }
  if (missed('dev.nginxRatio')) {
    const sqliteWithRuntimeUs = value('sync.sqliteCpuUs') + value('sync.runtimeBehindSidecarCpuUs');
    notes.push(
      `\`runlet dev\` served ${n(value('dev.devRps'))} runs/s against nginx's ${n(value('dev.nginxRps'))} (${n(value('dev.nginxRatio'), 2)}×), ` +
        `spending ${n(value('dev.cpuUs'))} µs of CPU per run with its runtime` +
        (Number.isFinite(sqliteWithRuntimeUs) ? ` (the SQLite sidecar and the runtime behind it: ${n(sqliteWithRuntimeUs)} µs in the sync scenario)` : '') +
        `. Its port is read by the ` +
        `sidecar's front as the pod's is, and its runs are recorded as the SQLite sidecar's are; its runtime is a process of its own on the ` +
        `same cores.`,
    );
  }
  if (missed('async.acceptP50Ms') || missed('async.acceptedPerS')) {
    notes.push(
      `Async accept in a pod: a 202 waits until the run's pending record is appended to the RunLog journal in the pod's emptyDir (one ` +
        `write() shared by the accepts that arrive during the previous one; the RunLog write that replicates it follows, not awaited). ` +
        `Measured: p50 ${n(value('async.acceptP50Ms'), 3)} ms at one connection, ${n(value('async.acceptedPerS'))} runs/s at 32 (sync through ` +
        `the same sidecar: ${n(value('async.syncRps'))} runs/s). The SQLite sidecar, whose durable record is a local commit, accepted ` +
        `${n(value('async.sqliteAcceptedPerS'))} runs/s with a 202 p50 of ${n(value('async.sqliteAcceptP50Ms'), 3)} ms.`,
    );
  }
  if (missed('webhook.deliveriesPerS')) {
    notes.push(
      `Webhook deliveries are timed end to end from the first call: the pod's sidecar delivered ${n(value('webhook.deliveriesPerS'))}/s ` +
        `and the SQLite sidecar, with the same deliverer, ${n(value('webhook.sqliteDeliveriesPerS'))}/s.`,
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
  if (missed('burst.decisionSeconds')) {
    const decision = value('burst.decisionSeconds');
    const seen = value('burst.loadSeenSeconds');
    const decided = value('burst.decidedSeconds');
    notes.push(
      `Scale-up: the autoscaler wrote its decision ${n(decision, 1)} s after the burst began. For ${n(seen, 1)} s of it the operator did ` +
        `not yet see more than one replica's load: each sidecar averages its calls in flight and queued over its last second (sampled every ` +
        `100 ms), which the operator's leader scrapes from every ready replica's admin port (GET /load) every 500 ms. The scaler decided ` +
        `${n(decided - seen, 1)} s after that (its 500 ms tick, and the panic window, whose newest second weighs 78.5 %), and its write ` +
        `was seen ${n(decision - decided, 1)} s after the decision. Here the process kubelet, the API server and the operator share one ` +
        `event loop on a shared machine.`,
    );
  }
  if (missed('coldstart.holderAddedMs')) {
    notes.push(
      `The holding path (${n(value('coldstart.holderAddedMs'))} ms from the replica's containers ready to the call relayed) is the ` +
        `readiness travelling to the holder: the process kubelet relists Deployments and Pods before it writes a pod's status, the API ` +
        `server sends the change down every pod watch, and the holder relays in the turn its pod watch delivers it (profiled once: ` +
        `10–20 ms, 10–90 ms and 1–15 ms of it on a loaded machine), all on the runner's one event loop.`,
    );
  }
  if (value('coldstart.callerAddedMs') > 100) {
    notes.push(
      `A call at zero waited ${n(value('coldstart.callerAddedMs'))} ms beyond its replica's start and a warm call: the holding path ` +
        `(${n(value('coldstart.holderAddedMs'))} ms) and, for ${n(value('coldstart.firstCallExtraMs'))} ms, the new replica's first call. ` +
        `That is the replica's, whatever path its first call takes: its sidecar verifies its first token (the issuer's key set is ` +
        `fetched while the app starts, but the verification code runs for the first time). Before that prefetch, first calls on fresh ` +
        `replicas took 107–278 ms with auth on and 14–28 ms with auth off, second calls 9–26 ms.`,
    );
  }
  return notes;
}
