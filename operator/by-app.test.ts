// Items kept per App: an item is under one App at a time, moving says which App it left, and an App whose last
// item left is no longer listed.
import { describe, expect, it } from 'vitest';
import { ByApp } from './by-app.ts';

describe('items kept per App', () => {
  it('moves an item to its new App, naming the one it left, and drops an App left empty', () => {
    const byApp = new ByApp<number>();
    expect(byApp.set('shop/a', 'shop/pod-1', 1)).toBeUndefined();
    expect(byApp.set('shop/a', 'shop/pod-2', 2)).toBeUndefined();
    // Seen again under the same App: replaced, not moved.
    expect(byApp.set('shop/a', 'shop/pod-1', 3)).toBeUndefined();
    expect([...byApp.of('shop/a')!]).toEqual([
      ['shop/pod-1', 3],
      ['shop/pod-2', 2],
    ]);
    expect(byApp.set('shop/b', 'shop/pod-2', 4)).toBe('shop/a');
    expect(byApp.appOf('shop/pod-2')).toBe('shop/b');
    expect([...byApp.of('shop/a')!.keys()]).toEqual(['shop/pod-1']);
    expect(byApp.delete('shop/pod-1')).toBe('shop/a');
    expect(byApp.of('shop/a')).toBeUndefined();
    expect([...byApp.entries()].map(([app, items]) => [app, [...items]])).toEqual([['shop/b', [['shop/pod-2', 4]]]]);
    expect(byApp.delete('shop/pod-1')).toBeUndefined();
    expect(byApp.appOf('shop/pod-1')).toBeUndefined();
  });
});
