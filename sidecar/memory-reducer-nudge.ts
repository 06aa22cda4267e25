// Gives a busy period's memory back once it is over. V8 collects to shrink the heap after a burst (its memory
// reducer) only once it sees a low allocation rate, and since V8 13.1 (Node 24) that rate includes the embedder
// heap's (cppgc) with no lower bound: a process that never allocates there reports exactly 0, which V8 reads as
// the highest rate (V8 CL 5935313). The reducer then waits for its watchdog, 100 s after the last full collection,
// which a trickle of calls keeps pushing back: the sidecar stayed at its peak RSS (105–115 MB after a load) when
// idle. Compiling a vm.Script allocates on that heap; one every 30 s keeps the rate above zero (it decays to
// exactly zero within about 110 s), and the reducer collects about 10 s after a burst that grew the heap (V8
// starts a cycle only then: loads that come back at the same size keep the heap they grew). Nothing else is
// touched: no forced collection, no heap limits, no cost while busy.
import { Script } from 'node:vm';

const NUDGE_INTERVAL_MS = 30_000;

/** Starts the nudges; `stop` ends them. */
export function nudgeMemoryReducer(): { stop(): void } {
  const nudge = (): void => void new Script('0');
  nudge();
  const timer = setInterval(nudge, NUDGE_INTERVAL_MS);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
