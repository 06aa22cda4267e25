// Streams of 1,000 small items yielded with no pause, read through the sidecar (SSE) and, as the reference,
// straight from the runtime (its own line framing), one stream at a time, alternating.
import { readStream, type StreamTiming } from '../load/stream-client.ts';
import type { FigureSpec, RoundFigures } from '../report.ts';
import { runUrl, type Stack } from '../stack.ts';
import { median } from '../stats.ts';
import type { Settings } from './settings.ts';

const SCENARIO = 'streaming, 1,000 items';
const ITEMS = 1000;
const BODY = JSON.stringify({ n: ITEMS });
const MIN_STREAMS = 5;

export const STREAM_FIGURES: FigureSpec[] = [
  { key: 'stream.firstItemMs', scenario: SCENARIO, label: 'first event at the client after its yield, through the sidecar (median of the round)', unit: 'ms', decimals: 2, target: { op: '<=', value: 5 } },
  { key: 'stream.sidecarEventsPerS', scenario: SCENARIO, label: 'events/s through the sidecar, one stream', unit: 'events/s', decimals: 0, target: { op: '>=', value: 20_000 } },
  { key: 'stream.rateRatio', scenario: SCENARIO, label: 'sidecar ÷ direct items/s', unit: '×', decimals: 2 },
  { key: 'stream.directItemsPerS', scenario: SCENARIO, label: 'items/s read from the runtime directly, one stream', unit: 'items/s', decimals: 0 },
  { key: 'stream.directFirstItemMs', scenario: SCENARIO, label: 'first item after its yield, direct', unit: 'ms', decimals: 2 },
];

export async function measureStream(stack: Stack, settings: Settings): Promise<RoundFigures> {
  const direct: StreamTiming[] = [];
  const sidecar: StreamTiming[] = [];
  const deadline = performance.now() + settings.durationS * 1000;
  while (direct.length < MIN_STREAMS || performance.now() < deadline) {
    direct.push(checked(await readStream(`${stack.runtime.url}/ticks`, BODY, 'runtime-lines')));
    sidecar.push(checked(await readStream(runUrl(stack.sidecar, 'ticks'), BODY, 'sse')));
  }
  const sidecarRate = itemsPerSecond(sidecar);
  const directRate = itemsPerSecond(direct);
  return {
    'stream.firstItemMs': median(sidecar.map((timing) => timing.firstItemMs)),
    'stream.sidecarEventsPerS': sidecarRate,
    'stream.rateRatio': sidecarRate / directRate,
    'stream.directItemsPerS': directRate,
    'stream.directFirstItemMs': median(direct.map((timing) => timing.firstItemMs)),
  };
}

function checked(timing: StreamTiming): StreamTiming {
  if (timing.items !== ITEMS) throw new Error(`a stream of ${ITEMS} items delivered ${timing.items}`);
  return timing;
}

function itemsPerSecond(timings: StreamTiming[]): number {
  const items = timings.reduce((sum, timing) => sum + timing.items, 0);
  const ms = timings.reduce((sum, timing) => sum + timing.totalMs, 0);
  return (items * 1000) / ms;
}
