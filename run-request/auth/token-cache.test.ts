import { describe, expect, it } from 'vitest';
import { TokenCache } from './token-cache.ts';

const LIMITS = { maxEntries: 100, maxChars: 1_000_000 };

describe('TokenCache', () => {
  it('holds a verified token until just before its expiry, then forgets it', () => {
    const cache = new TokenCache(LIMITS);
    const token = { projectId: 'team-a', expiresAtMs: 2_000 };
    cache.set('Bearer a.b.c', token, 1_000);
    expect(cache.get('Bearer a.b.c', 1_999)).toBe(token);
    expect(cache.get('Bearer a.b.c', 2_000)).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it('does not store a token already expired', () => {
    const cache = new TokenCache(LIMITS);
    cache.set('Bearer a.b.c', { projectId: 'team-a', expiresAtMs: 1_000 }, 1_000);
    expect(cache.size).toBe(0);
  });

  it('evicts the least recently used entry beyond its bound', () => {
    const cache = new TokenCache({ ...LIMITS, maxEntries: 2 });
    const token = { projectId: 'team-a', expiresAtMs: 10_000 };
    cache.set('first', token, 0);
    cache.set('second', token, 0);
    cache.get('first', 1);
    cache.set('third', token, 0);
    expect(cache.get('second', 1)).toBeUndefined();
    expect(cache.get('first', 1)).toBe(token);
    expect(cache.get('third', 1)).toBe(token);
  });

  it('bounds the characters held, leaving an oversized credential uncached', () => {
    const cache = new TokenCache({ maxEntries: 100, maxChars: 1_000 });
    const token = { projectId: 'team-a', expiresAtMs: 10_000 };
    cache.set('x'.repeat(2_000), token, 0);
    expect(cache.size).toBe(0);
    for (let i = 0; i < 10; i++) cache.set(`${i}`.padEnd(200, 'x'), token, 0);
    expect(cache.size).toBeLessThanOrEqual(3);
  });
});
