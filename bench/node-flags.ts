// How the sidecar's NODE_OPTIONS (operator/render/sidecar-container.ts, SIDECAR_NODE_OPTIONS) were chosen: a
// measurement made once, with its figures, written into every report as its own section. It is not re-measured
// by each run; `npm run bench -- --scenarios sync,memory --sidecar-node-options=FLAGS` measures other flags.
import type { ReportSection } from './report.ts';

export const NODE_FLAGS_SECTION: ReportSection = {
  title: 'Sidecar Node flags (measured once, on 2026-11-21)',
  lines: [
    'The pod\'s sidecar container starts Node with `NODE_OPTIONS=--max-semi-space-size=4 --expose-gc` (V8 semi-spaces of at most 4 MB; `gc` for the collection once a busy period is over, in the sidecar memory section below), and so do the sidecars here. Without the flag, Node sizes them from the memory it sees: 64 MB on this 24 GB machine, and smaller in a container with a low memory limit (Node reads the cgroup limit), so the flag also makes the pod\'s setting the one measured here, whatever the limit.',
    '',
    'Chosen by measurement on the compiled pod sidecar (`--run-store runlog`, its run port read by its own HTTP/1.1 front, about 12 KB of garbage per run). "bench": `npm run bench -- --scenarios sync,memory --rounds 1 --sidecar-node-options=--max-semi-space-size=N`, one run per N. "side by side": two sidecars against one runtime, loaded in turn (wrk, 3 s at 32 connections, 4 loads each in alternating order after a warm-up), median of the loads; CPU is user time per run from /proc. The machine was shared, so single figures vary by ±20%; only differences that held in every pairing are read as such.',
    '',
    '| N (MB) | bench: sidecar ÷ nginx | bench: p99 ÷ nginx | bench: RSS after load | side by side: runs/s | side by side: user CPU per run | side by side: RSS after load |',
    '|---|---|---|---|---|---|---|',
    '| 2 | 0.69× | 2.12× | 102 MB | 10,645 (against 11,717 for N=4) | 45 µs (40.5 for N=4) | 116 MB (125 for N=4) |',
    '| **4** | 0.66× | 2.03× | 106 MB | 12,090 (against 9,869 for N=8) | 38.5 µs (50 for N=8) | 122 MB (146 for N=8) |',
    '| 8 | 0.60× | 3.27× | 119 MB | | | |',
    '',
    'With less garbage per run than when 8 was chosen (before the front, ~18 KB), 4 MB semi-spaces hold several hundred runs between scavenges; each scavenge is shorter (1–1.5 ms against 1.5–2.5), which shows in the p99, and RSS is lower. 2 saves a few more MB at a few µs more CPU per run. Also tried, side by side with N=4: `--heap-growing-percent=15` (collect the old generation sooner) brought RSS after load to 91–99 MB at +10 µs per run and a p99 of 11 ms against 7–8; `--max-old-space-size=48` to 98 MB at the same cost. Neither is set: the CPU and p99 they cost are targets too, and neither reaches 80 MB.',
  ],
};
