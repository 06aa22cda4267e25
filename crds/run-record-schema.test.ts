import { Value } from '@sinclair/typebox/value';
import { describe, expect, it } from 'vitest';
import { RunRecordSchema, type RunRecord } from './run-record-schema.ts';
import { runRecord } from '../test/support/crd-fixtures.ts';

describe('RunRecordSchema', () => {
  it('accepts a complete record and one that has just been accepted', () => {
    expect(Value.Check(RunRecordSchema, runRecord())).toBe(true);
    const pending: RunRecord = {
      ...runRecord(),
      status: 'pending',
      statusCode: null,
      error: null,
      startedAt: null,
      completedAt: null,
      queueTimeMs: null,
      runtimeMs: null,
      responseTimeMs: null,
      webhook: null,
    };
    expect(Value.Check(RunRecordSchema, pending)).toBe(true);
  });

  it('requires every field, null where absent', () => {
    const { webhook: _omitted, ...withoutWebhook } = runRecord();
    expect(Value.Check(RunRecordSchema, withoutWebhook)).toBe(false);
  });
});
