// The idle collection: its policy read by read, and in a real process started as the pod starts the sidecar
// (--expose-gc), where V8 itself reports the memory-reducing collection (--trace-gc) and its heap's size.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../test/support/wait.ts';
import { IdleCollectionPolicy } from './idle-collection.ts';

describe('the idle collection policy', () => {
  it('is due once a busy read has been followed by enough idle reads in a row, and then not again until busy', () => {
    const policy = new IdleCollectionPolicy({ idleReads: 3 });
    expect([0.5, 0, 0].map((read) => policy.read(read))).toEqual([false, false, false]);
    expect(policy.read(0)).toBe(true);
    expect([0, 0, 0, 0, 0].some((read) => policy.read(read))).toBe(false);
  });

  it('is never due in a process that was never busy', () => {
    const policy = new IdleCollectionPolicy({ idleReads: 2 });
    expect(Array.from({ length: 20 }, () => policy.read(0.001)).some(Boolean)).toBe(false);
  });

  it('counts the idle reads again after a read that is neither idle nor busy, or a busy one', () => {
    const policy = new IdleCollectionPolicy({ idleReads: 2, busyAbove: 0.05, idleBelow: 0.01 });
    expect([0.9, 0, 0.02, 0].map((read) => policy.read(read))).toEqual([false, false, false, false]);
    expect(policy.read(0)).toBe(true);
    expect([0.9, 0, 0.9, 0].map((read) => policy.read(read))).toEqual([false, false, false, false]);
    expect(policy.read(0)).toBe(true);
  });
});

const MODULE = join(import.meta.dirname, 'idle-collection.ts');
/** A sidecar's life in short: idle, a busy burst that leaves garbage in the old generation, then idle again. */
const BURST_THEN_IDLE = `
const { collectWhenIdle, gcExposed } = await import(process.argv[1]);
console.log('exposed ' + gcExposed());
collectWhenIdle({ intervalMs: 100, idleReads: 3 });
setTimeout(() => {
  console.log('burst starts');
  let kept = [];
  const end = Date.now() + 600;
  while (Date.now() < end) {
    kept.push(Array.from({ length: 5_000 }, (_, j) => ({ j, s: 'item ' + j })));
    if (kept.length > 200) kept.shift();
  }
  kept = null;
  console.log('burst over');
}, 1000);
setInterval(() => {}, 1000);
`;

const children: ReturnType<typeof spawn>[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
});

function start(nodeFlags: string[]): { output: () => string } {
  const child = spawn(process.execPath, [...nodeFlags, '--trace-gc', '--input-type=module', '-e', BURST_THEN_IDLE, MODULE], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  return { output: () => output };
}

/** `Mark-Compact (reduce) 14.9 (27.7) -> 4.0 (6.5) MB ... testing`: a gc() call's, with the heap's committed size after it. */
const REDUCING_GC = /Mark-Compact \(reduce\) [\d.]+ \(([\d.]+)\) -> [\d.]+ \(([\d.]+)\) MB.*testing/;
const reducingGcs = (output: string) => [...output.matchAll(new RegExp(REDUCING_GC, 'g'))];

describe('collectWhenIdle in a process started with --expose-gc', () => {
  it('collects to shrink the heap once the busy period is over, and not before it', async () => {
    const child = start(['--expose-gc']);
    await waitFor(() => child.output().includes('burst over'), { timeoutMs: 30_000, what: 'the burst to end' });
    await waitFor(() => reducingGcs(child.output()).length > 0, { timeoutMs: 30_000, intervalMs: 100, what: 'a memory-reducing collection' });
    const output = child.output();
    expect(output).toContain('exposed true');
    // Idle for a second before the burst (ten reads): nothing to give back, so no collection.
    expect(output.slice(0, output.indexOf('burst starts'))).not.toMatch(REDUCING_GC);
    const [first] = reducingGcs(output.slice(output.indexOf('burst over')));
    const [committedBefore, committedAfter] = [Number(first![1]), Number(first![2])];
    expect(committedAfter).toBeLessThan(committedBefore / 2);
  }, 60_000);

  it('starts nothing in a process without the flag', async () => {
    const script = `
const { collectWhenIdle, gcExposed } = await import(process.argv[1]);
const timers = () => process.getActiveResourcesInfo().filter((name) => name === 'Timeout').length;
const before = timers();
collectWhenIdle({ intervalMs: 100 });
console.log(JSON.stringify({ exposed: gcExposed(), timersAdded: timers() - before }));
`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script, MODULE], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    const [code] = (await once(child, 'exit')) as [number | null];
    expect(code).toBe(0);
    expect(JSON.parse(output)).toEqual({ exposed: false, timersAdded: 0 });
  }, 60_000);
});
