import { describe, expect, it } from 'vitest';
import { parseFieldSelector, parseLabelSelector } from './selectors.ts';
import type { KubeObject } from './types.ts';

const object = (labels: Record<string, string>, extra: Record<string, unknown> = {}): KubeObject => ({
  metadata: { name: 'n', namespace: 'ns', labels },
  ...extra,
});

describe('label selector parsing', () => {
  it.each([
    ['', {}, true],
    ['a=1', { a: '1' }, true],
    ['a = 1', { a: '1' }, true],
    ['a==1', { a: '2' }, false],
    ['a!=1', {}, true],
    ['runlet.dev/app in (x, y)', { 'runlet.dev/app': 'y' }, true],
    ['a in (x,y),b notin (z)', { a: 'x', b: 'z' }, false],
    ['a notin (x)', {}, true],
    ['a,!b', { a: '' }, true],
    ['!b', { b: '' }, false],
  ])('%j against %j is %s', (selector, labels, expected) => {
    expect(parseLabelSelector(selector)(object(labels))).toBe(expected);
  });

  it.each(['a in x', 'a=(1)', '=1', 'a b'])('rejects %j', (selector) => {
    expect(() => parseLabelSelector(selector)).toThrow(/unable to parse requirement/);
  });
});

describe('field selector parsing', () => {
  it('compares dotted paths as strings, absent fields as empty', () => {
    const pod = object({}, { spec: { nodeName: 'node-1' }, status: { phase: 'Running' } });
    expect(parseFieldSelector('metadata.name=n,metadata.namespace==ns')(pod)).toBe(true);
    expect(parseFieldSelector('spec.nodeName!=node-1')(pod)).toBe(false);
    expect(parseFieldSelector('status.podIP=')(pod)).toBe(true);
    expect(() => parseFieldSelector('metadata.name')).toThrow(/invalid field selector/);
  });
});
