import { describe, expect, it } from 'vitest';
import { buildWebhookBody } from './payload.ts';

const completedAt = new Date('2026-03-01T12:34:56.789Z');

describe('buildWebhookBody', () => {
  it('builds the success body in the documented member order with the result spliced in as sent', () => {
    const resultJson = '{"b": [1, 2.50, "x"],\n "a": null}';
    const body = buildWebhookBody({ runId: 'r-1', status: 'success', statusCode: 200, resultJson, runTimeMs: 42, completedAt });

    expect(body).toContain(`"result":${resultJson}`);
    const parsed = JSON.parse(body) as Record<string, unknown>;
    expect(Object.keys(parsed)).toEqual(['run_id', 'status', 'status_code', 'result', 'run_time_ms', 'timestamp']);
    expect(parsed).toEqual({
      run_id: 'r-1',
      status: 'success',
      status_code: 200,
      result: { b: [1, 2.5, 'x'], a: null },
      run_time_ms: 42,
      timestamp: '2026-03-01T12:34:56.789Z',
    });
  });

  it('builds the failure body with error {type, message}, escaping text', () => {
    const body = buildWebhookBody({
      runId: 'r-"2"',
      status: 'failure',
      statusCode: 500,
      error: { type: 'ValueError', message: 'bad "input"\nline 2 \u2028' },
      runTimeMs: null,
      completedAt,
    });
    const parsed = JSON.parse(body) as Record<string, unknown>;
    expect(Object.keys(parsed)).toEqual(['run_id', 'status', 'status_code', 'error', 'run_time_ms', 'timestamp']);
    expect(parsed).toEqual({
      run_id: 'r-"2"',
      status: 'failure',
      status_code: 500,
      error: { type: 'ValueError', message: 'bad "input"\nline 2 \u2028' },
      run_time_ms: null,
      timestamp: '2026-03-01T12:34:56.789Z',
    });
  });

  it('keeps only type and message of the error', () => {
    const error = Object.assign({ type: 'Timeout', message: 'too slow' }, { traceback: 'secret internals' });
    const body = buildWebhookBody({ runId: 'r', status: 'failure', statusCode: 504, error, runTimeMs: 1, completedAt });
    expect(body).not.toContain('traceback');
  });

  it('refuses an empty result rather than sending invalid JSON', () => {
    expect(() =>
      buildWebhookBody({ runId: 'r-3', status: 'success', statusCode: 200, resultJson: ' \n', runTimeMs: 1, completedAt }),
    ).toThrow(/run r-3: resultJson is empty/);
  });
});
