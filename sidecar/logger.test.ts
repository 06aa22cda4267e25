import { describe, expect, it } from 'vitest';
import { readableLine } from './logger.ts';

describe('readable log lines (runlet dev at a terminal)', () => {
  it('puts a run on one line: app, function, mode, outcome, duration, id', () => {
    const log = { level: 30, time: 1, pid: 7, name: 'runlet-dev', msg: 'run', runId: 'r-1', app: 'dev/hello', function: 'run', mode: 'sync', status: 'failure', statusCode: 502, durationMs: 12.345, reason: 'runtime_crashed' };
    expect(readableLine(log, 'run')).toBe('dev/hello run sync → failure (runtime_crashed) 502 in 12.3 ms  r-1');
  });

  it('adds the other fields of a message as key=value, and an error with its stack', () => {
    expect(readableLine({ level: 30, msg: 'runtime ready', app: 'dev/hello', origin: 'http://127.0.0.1:1' }, 'runtime ready')).toBe(
      'runtime ready app=dev/hello origin=http://127.0.0.1:1',
    );
    const line = readableLine({ msg: 'failed', err: { stack: 'Error: boom\n    at x' } }, 'failed');
    expect(line).toBe('failed\nError: boom\n    at x');
  });
});
