import { describe, expect, it } from 'vitest';
import { captureLogger, WARN } from '../../test/support/runlog-store-kit.ts';
import { StoreRefusalLog } from './store-refusal-log.ts';

describe('the run store refusal log', () => {
  it('logs the first refusal with its cause at once, then at most one line an interval with the count since', () => {
    const { logger, lines } = captureLogger();
    let now = 1_000;
    const log = new StoreRefusalLog(logger, { intervalMs: 10_000, now: () => now });
    const full = new Error('ENOSPC: no space left on device, write');
    log.note('run-1', full);
    for (let call = 2; call <= 50; call += 1) {
      now += 100;
      log.note(`run-${call}`, full);
    }
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: WARN, runId: 'run-1', alsoRefusedSinceLastLine: 0, err: { message: full.message } });
    now += 10_000;
    log.note('run-51', full);
    expect(lines).toHaveLength(2);
    expect(lines[1]).toMatchObject({ runId: 'run-51', alsoRefusedSinceLastLine: 49 });
    expect(String(lines[1]!.msg)).toMatch(/could not record an async call/);
  });
});
