// How the sidecar's NODE_OPTIONS (operator/render/sidecar-container.ts, SIDECAR_NODE_OPTIONS) were chosen: a
// measurement made once, with its figures, written into every report as its own section. It is not re-measured
// by each run; `npm run bench -- --scenarios sync,memory --sidecar-node-options=FLAGS` measures other flags.
import type { ReportSection } from './report.ts';

export const NODE_FLAGS_SECTION: ReportSection = {
  title: 'Sidecar Node flags (measured once, on 2026-11-21)',
  lines: [
    'The pod\'s sidecar container starts Node with `NODE_OPTIONS=--max-semi-space-size=8` (V8 semi-spaces of at most 8 MB), and so do the sidecars here. Without the flag, Node sizes them from the memory it sees: 64 MB on this 24 GB machine, and smaller in a container with a low memory limit (Node reads the cgroup limit), so the flag also makes the pod\'s setting the one measured here, whatever the limit.',
    '',
    'Chosen by measurement, on the pod\'s sidecar (compiled, `--run-store runlog`) as it was before its run port moved from fastify to node:http and its optional modules (undici, client-node, jose, the YAML parser) became lazy: the absolute CPU and RSS figures below are that sidecar\'s, higher than today\'s in the table above; what they compare, N against N, is what chose the flag. The machine was shared (load average 3–15), so throughput and p99 varied by ±30% or more from one load to the next and tell the settings apart only where noted. "bench": `npm run bench -- --scenarios sync,memory --rounds 2 --sidecar-node-options=--max-semi-space-size=N`, 3 runs per N in rotating order (2 for N=4: one run failed to start under load), median of the rounds. "side by side": one sidecar per N against one runtime, loaded in turn (3 s at 32 connections each; 1 to 3 runs of 8–10 rounds, 8 loads for N=1 and the default, 18–26 for the others), V8\'s GC pauses counted by a PerformanceObserver preloaded in each sidecar.',
    '',
    '| N (MB) | bench: sidecar ÷ nginx | bench: runs/s | bench: p99 | bench: RSS after load | side by side: CPU per run | side by side: GC pause per run | side by side: scavenges per 1000 runs | side by side: RSS after load |',
    '|---|---|---|---|---|---|---|---|---|',
    '| 1 | 0.24× | 4004 | 27 ms | 162 MB | 141 µs | 42 µs | 29.5 | 176 MB |',
    '| 2 | 0.34× | 5020 | 31 ms | 163 MB | 138 µs | 20 µs | 13.8 | 167 MB |',
    '| 4 | 0.19× | 2725 | 78 ms | 157 MB | 133 µs | 14 µs | 7.3 | 182 MB |',
    '| **8** | 0.30× | 4407 | 32 ms | 175 MB | 127 µs | 10 µs | 4.1 | 176 MB |',
    '| 16 | 0.30× | 3838 | 43 ms | 196 MB | 122 µs | 6 µs | 1.8 | 191 MB (up to 254) |',
    '| none (64 here) | 0.33× | 5202 | 19 ms | 269 MB | 118 µs | 7 µs | 0.6 | 282 MB (up to 297) |',
    '',
    'RSS after load is the same, within the spread between runs (150–195 MB), for every N up to 8; at 16 it keeps growing under load (to 250 MB), and Node\'s default takes about 100 MB more. The cost runs the other way: each halving of N doubles the scavenges, and below 8 their pauses add up to measurable CPU per run (+4 µs at 4, +10 at 2, +32 at 1 against 8, side by side). 8 has the lowest RSS at the least GC cost; against Node\'s default it costs about 9 µs (7%) more CPU per run side by side, 3 µs of it in GC pauses, which is below what this machine\'s throughput figures can resolve. Also tried with N=8, side by side in one run: `--max-old-space-size=128` and `=64` (the live heap after a full collection is ~38 MB) kept the peak RSS at 176–181 MB against 198 MB for N=8 alone, the same median, and cost about 30 µs more CPU per run (149–151 against 118 µs: more marking), so neither is set; `--optimize-for-size` is not allowed in NODE_OPTIONS.',
  ],
};
