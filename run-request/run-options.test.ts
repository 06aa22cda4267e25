import { describe, expect, it } from 'vitest';
import { ProblemError } from '../crds/problem.ts';
import { forwardedQuery, parseRunOptions } from './run-options.ts';

describe('run options', () => {
  it.each([
    ['true', true],
    ['1', true],
    ['false', false],
    ['0', false],
  ])('async=%s → %s', (value, expected) => {
    expect(parseRunOptions({ async: value }).async).toBe(expected);
  });

  it.each(['yes', 'TRUE', '', '2'])('async=%j is a 400 naming the accepted values', (value) => {
    expect(() => parseRunOptions({ async: value })).toThrow(ProblemError);
    expect(() => parseRunOptions({ async: value })).toThrow(/true, false, 1, 0/);
  });

  it('refuses a reserved parameter given twice', () => {
    expect(() => parseRunOptions({ async: ['true', 'false'] })).toThrow(/given 2 times/);
  });

  it('removes only the reserved parameters from a forwarded query, keeping the rest byte for byte', () => {
    expect(forwardedQuery('a=1&async=true&b=%20x+y&webhookEndpoint=http%3A%2F%2Fh')).toBe('a=1&b=%20x+y');
    expect(forwardedQuery('asyncish=1&async')).toBe('asyncish=1');
    expect(forwardedQuery('bad=%zz&x=1')).toBe('bad=%zz&x=1');
    expect(forwardedQuery('%61sync=true&z=1')).toBe('z=1');
  });
});
