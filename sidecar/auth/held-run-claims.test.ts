import { describe, expect, it } from 'vitest';
import { newRunId } from '../../run-request/run-id.ts';
import { HELD_RUN_MAX_AGE_MS } from '../../run-request/auth/held-run.ts';
import { HeldRunClaims } from './held-run-claims.ts';

describe('held run ids, taken once', () => {
  function claims(recorded: Set<string> = new Set()) {
    let now = 1_795_000_000_000;
    const taken = new HeldRunClaims({ has: (id) => recorded.has(id) }, () => now);
    return { taken, advance: (ms: number) => (now += ms) };
  }

  it('a run id is taken by the first call only', () => {
    const { taken } = claims();
    const runId = newRunId();
    expect(taken.take(runId)).toBe(true);
    expect(taken.take(runId)).toBe(false);
    expect(taken.take(newRunId())).toBe(true);
  });

  it('never one the run store holds a record of (a previous process of the sidecar took it)', () => {
    const runId = newRunId();
    expect(claims(new Set([runId])).taken.take(runId)).toBe(false);
  });

  it('is remembered for as long as a header naming it can be good, then forgotten (the store still answers for it)', () => {
    const { taken, advance } = claims();
    const runId = newRunId();
    taken.take(runId);
    advance(2 * HELD_RUN_MAX_AGE_MS - 1);
    expect(taken.take(runId)).toBe(false);
    advance(1);
    taken.take(newRunId());
    expect(taken.take(runId)).toBe(true);
  });

  it('a run id given back (its call refused, nothing recorded) may be taken again', () => {
    const { taken } = claims();
    const runId = newRunId();
    taken.take(runId);
    taken.giveBack(runId);
    expect(taken.take(runId)).toBe(true);
  });
});
