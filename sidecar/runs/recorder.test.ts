import { validate, version } from 'uuid';
import { describe, expect, it } from 'vitest';
import { newRunId } from './recorder.ts';

describe('newRunId', () => {
  it('makes UUID v7 ids, unique, that sort in creation order within a millisecond too', () => {
    // More than one pool of random bytes (256 ids) and many ids per millisecond.
    const ids = Array.from({ length: 5000 }, () => newRunId());
    expect(ids.every((id) => validate(id) && version(id) === 7)).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort()).toEqual(ids);
  });
});
