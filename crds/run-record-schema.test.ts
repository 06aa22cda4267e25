import { Value } from '@sinclair/typebox/value';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { RUN_STATUSES, type RunRecord } from '../sidecar/runs/record.ts';
import { runRecord } from '../test/support/crd-fixtures.ts';
import { RUN_STATUS_VALUES, RunRecordSchema, type RunRecordResource } from './run-record-schema.ts';

describe('RunRecordSchema', () => {
  it('has the static type of sidecar/runs/record.ts RunRecord (checked by npm run typecheck)', () => {
    expectTypeOf<RunRecordResource>().toEqualTypeOf<RunRecord>();
    // Mutual assignability, spelled out: each is usable where the other is expected.
    const fromSchema: RunRecord = runRecord();
    const fromSidecar: RunRecordResource = fromSchema;
    expect(fromSidecar).toBe(fromSchema);
  });

  it('lists the same statuses as the sidecar', () => {
    expect([...RUN_STATUS_VALUES]).toEqual([...RUN_STATUSES]);
  });

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
