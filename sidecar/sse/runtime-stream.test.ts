import { describe, expect, it } from 'vitest';
import { RuntimeStreamDecoder } from './runtime-stream.ts';

describe('RuntimeStreamDecoder', () => {
  it('turns item lines into SSE events: strings as text, other items as their JSON', () => {
    const decoder = new RuntimeStreamDecoder({ keepLimitBytes: 1024 });
    expect(decoder.push('i"hello"\ni{"a":1}\ni42\n')).toBe('data: hello\n\ndata: {"a":1}\n\ndata: 42\n\n');
    expect(decoder.push('d\n')).toBe('');
    expect(decoder.state).toBe('done');
    expect(decoder.items).toEqual(['"hello"', '{"a":1}', '42']);
  });

  it('splits a string item on every line break into data lines of one event', () => {
    const decoder = new RuntimeStreamDecoder({ keepLimitBytes: null });
    expect(decoder.push('i"a\\nb\\r\\nc\\rd"\n')).toBe('data: a\ndata: b\ndata: c\ndata: d\n\n');
    expect(decoder.push('i""\n')).toBe('data: \n\n');
    expect(decoder.items).toBeNull();
  });

  it('reassembles lines split across chunks', () => {
    const decoder = new RuntimeStreamDecoder({ keepLimitBytes: null });
    expect(decoder.push('i"par')).toBe('');
    expect(decoder.push('tial"\ni1')).toBe('data: partial\n\n');
    expect(decoder.push('\nd\n')).toBe('data: 1\n\n');
    expect(decoder.state).toBe('done');
  });

  it('ends with an error event on an error line and ignores what follows', () => {
    const decoder = new RuntimeStreamDecoder({ keepLimitBytes: null });
    const out = decoder.push('i1\ne{"type":"KeyError","message":"x"}\ni2\n');
    expect(out).toBe('data: 1\n\nevent: error\ndata: {"type":"KeyError","message":"x"}\n\n');
    expect(decoder.state).toBe('error');
    expect(decoder.error).toEqual({ type: 'KeyError', message: 'x' });
  });

  it('treats an unknown line kind as a protocol error rather than passing it on', () => {
    const decoder = new RuntimeStreamDecoder({ keepLimitBytes: null });
    expect(decoder.push('x???\n')).toMatch(/^event: error\ndata: \{"type":"ProtocolError"/);
    expect(decoder.state).toBe('error');
  });

  it("keeps the items' list up to the limit, to the byte", () => {
    // ["aaaa","bbbb"] is 15 bytes: 2 brackets, 2 items of 6, a comma.
    const decoder = new RuntimeStreamDecoder({ keepLimitBytes: 15 });
    decoder.push('i"aaaa"\ni"bbbb"\nd\n');
    expect(decoder.items).toEqual(['"aaaa"', '"bbbb"']);
    expect('[' + decoder.items!.join(',') + ']').toHaveLength(decoder.listBytes);
    expect(decoder.keptOverLimit).toBe(false);
  });

  it('keeps nothing once the list passes the limit, and still counts it; the events go on', () => {
    const limit = 64 * 1024;
    const decoder = new RuntimeStreamDecoder({ keepLimitBytes: limit });
    const item = JSON.stringify('é'.repeat(1000)); // 2,002 bytes, 1,002 characters
    let events = '';
    for (let i = 0; i < 200; i++) {
      events += decoder.push('i' + item + '\n');
      if (decoder.items !== null) expect(2 + decoder.items.length * 2003 - 1).toBeLessThanOrEqual(limit);
    }
    decoder.push('d\n');
    expect(decoder.items).toBeNull();
    expect(decoder.keptOverLimit).toBe(true);
    expect(decoder.listBytes).toBe(2 + 200 * 2002 + 199);
    expect(decoder.itemCount).toBe(200);
    expect(events.split('\n\n').length - 1).toBe(200);
  });
});
