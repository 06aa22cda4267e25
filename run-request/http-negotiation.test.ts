import { describe, expect, it } from 'vitest';
import { acceptsEventStream, acceptsGzip, functionNameProblem } from './http-negotiation.ts';

describe('request negotiation', () => {
  it.each([
    ['gzip', true],
    ['gzip, deflate, br', true],
    ['br;q=1.0, gzip;q=0.8', true],
    ['*', true],
    ['gzip;q=0', false],
    ['deflate', false],
    [undefined, false],
  ])('Accept-Encoding %s → gzip %s', (header, expected) => {
    expect(acceptsGzip(header)).toBe(expected);
  });

  it('recognises an event-stream Accept among others', () => {
    expect(acceptsEventStream('text/event-stream')).toBe(true);
    expect(acceptsEventStream('application/json, text/event-stream;q=0.9')).toBe(true);
    expect(acceptsEventStream('application/json')).toBe(false);
    expect(acceptsEventStream(undefined)).toBe(false);
  });

  it.each([
    ['run', null],
    ['_private', /private/],
    ['', /names no function/],
    ['a/b', /single path segment/],
    ['9lives', /not a valid Python function name/],
    ['with-dash', /not a valid Python function name/],
  ])('function name %j', (name, problem) => {
    const result = functionNameProblem(name);
    if (problem === null) expect(result).toBeNull();
    else expect(result).toMatch(problem);
  });
});
