import { parse, stringify, validate, version } from 'uuid';
import { describe, expect, it } from 'vitest';
import { newRunId } from './run-id.ts';

describe('newRunId', () => {
  it('makes UUID v7 ids, unique, that sort in creation order within a millisecond too', () => {
    // More than one pool of random bytes (256 ids) and many ids per millisecond.
    const ids = Array.from({ length: 5000 }, () => newRunId());
    expect(ids.every((id) => validate(id) && version(id) === 7)).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort()).toEqual(ids);
  });

  it("writes the canonical text form, the millisecond of its creation first", () => {
    const before = Date.now();
    const ids = Array.from({ length: 300 }, () => newRunId());
    const after = Date.now();
    for (const id of ids) {
      expect(stringify(parse(id))).toBe(id);
      const msecs = parseInt(id.slice(0, 8) + id.slice(9, 13), 16);
      expect(msecs).toBeGreaterThanOrEqual(before);
      expect(msecs).toBeLessThanOrEqual(after + 1);
    }
  });
});
