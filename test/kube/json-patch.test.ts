import { describe, expect, it } from 'vitest';
import { jsonPatch, mergePatch } from './patch.ts';

describe('JSON patch (RFC 6902)', () => {
  const document = { metadata: { annotations: { 'runlet.dev/a~b': 'x' } }, list: [1, 2, 3] };

  it('resolves escaped pointers and array positions', () => {
    expect(
      jsonPatch(document, [
        { op: 'replace', path: '/metadata/annotations/runlet.dev~1a~0b', value: 'y' },
        { op: 'add', path: '/list/-', value: 4 },
        { op: 'add', path: '/list/0', value: 0 },
        { op: 'move', from: '/list/1', path: '/first' },
        { op: 'copy', from: '/first', path: '/again' },
      ]),
    ).toEqual({ metadata: { annotations: { 'runlet.dev/a~b': 'y' } }, list: [0, 2, 3, 4], first: 1, again: 1 });
  });

  it('fails on missing paths and leaves the input untouched', () => {
    expect(() => jsonPatch(document, [{ op: 'remove', path: '/spec/replicas' }])).toThrow(/does not exist/);
    expect(() => jsonPatch(document, [{ op: 'replace', path: '/list/9', value: 1 }])).toThrow(/out of range/);
    expect(document.list).toEqual([1, 2, 3]);
  });
});

describe('JSON merge patch (RFC 7386)', () => {
  it('merges maps, replaces lists, deletes on null', () => {
    expect(mergePatch({ a: { b: 1, c: 2 }, l: [1, 2] }, { a: { c: null, d: 3 }, l: [3] })).toEqual({
      a: { b: 1, d: 3 },
      l: [3],
    });
  });
});
