// V8's memory reducer, which gives a burst's heap back once a process is idle, runs in a process that nudges it,
// and not otherwise within the test's bound (it waits for its 100 s watchdog: memory-reducer-nudge.ts). The
// process grows its heap with a burst of garbage, then idles on a timer, as a sidecar between bursts; V8 says
// what its reducer does (--trace-memory-reducer).
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../test/support/wait.ts';

const NUDGE_MODULE = join(import.meta.dirname, 'memory-reducer-nudge.ts');
const BURST_THEN_IDLE = `
const { nudgeMemoryReducer } = await import(process.argv[1]);
nudgeMemoryReducer();
let kept = [];
for (let i = 0; i < 60; i++) {
  kept.push(Array.from({ length: 50_000 }, (_, j) => ({ j, s: 'item ' + j })));
  if (kept.length > 8) kept.shift();
}
kept = null;
console.log('burst over');
setInterval(() => {}, 1000);
`;

const children: ReturnType<typeof spawn>[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
});

describe('the memory reducer nudge', () => {
  it('lets V8 collect to give the heap back within seconds of a burst, not after its 100 s watchdog', async () => {
    const child = spawn(process.execPath, ['--trace-memory-reducer', '--input-type=module', '-e', BURST_THEN_IDLE, NUDGE_MODULE], { stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(child);
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    await waitFor(() => output.includes('burst over'), { timeoutMs: 30_000, what: 'the burst to end' });
    // The reducer looks every 8 s; it starts once it sees a low allocation rate.
    await waitFor(() => /Memory reducer: started GC/.test(output), { timeoutMs: 60_000, intervalMs: 200, what: 'a memory-reducing collection' });
    expect(output).toMatch(/Memory reducer: low alloc/);
  }, 120_000);
});
