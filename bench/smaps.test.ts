import { existsSync, readFileSync, readlinkSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { readRssSplit, splitRss } from './smaps.ts';

const NODE = '/opt/node/bin/node';

/** One smaps entry, with the fields the kernel writes around the two the split reads. */
function mapping(header: string, rssKb: number, anonymousKb: number): string {
  return [
    header,
    `Size:              ${rssKb * 2} kB`,
    'KernelPageSize:        4 kB',
    `Rss:               ${rssKb} kB`,
    `Pss:               ${rssKb} kB`,
    `Anonymous:         ${anonymousKb} kB`,
    'AnonHugePages:         0 kB',
    'THPeligible:           0',
    'ProtectionKey:         0',
    'VmFlags: rd mr mw me ',
  ].join('\n');
}

describe('splitRss', () => {
  it('sums the binary\'s file pages, anonymous pages and the rest, counting copied pages of the binary as anonymous', () => {
    const smaps = [
      mapping(`00400000-00b6f000 r--p 00000000 fe:00 260689                             ${NODE}`, 5000, 0),
      mapping(`00b72000-025fe000 r-xp 00772000 fe:00 260689                             ${NODE}`, 16000, 0),
      // The binary's written data: 100 kB of it are the process's own copies.
      mapping(`05a2e000-05a4c000 rw-p 0562d000 fe:00 260689                             ${NODE}`, 120, 100),
      mapping('05a4c000-05a6b000 rw-p 00000000 00:00 0 ', 60, 60),
      mapping('2e9a0000-2ec0c000 rw-p 00000000 00:00 0                                  [heap]', 2000, 2000),
      mapping('7f1c10000000-7f1c10400000 rw-p 00000000 00:00 0 ', 4000, 4000),
      mapping('7f1c2a000000-7f1c2a190000 r-xp 00028000 fe:00 1839                       /usr/lib/x86_64-linux-gnu/libc.so.6', 1300, 0),
      mapping('7f1c2a190000-7f1c2a194000 rw-p 001d8000 fe:00 1839                       /usr/lib/x86_64-linux-gnu/libc.so.6', 16, 16),
      mapping('7f1c2b000000-7f1c2b001000 r--s 00000000 00:01 99                         /memfd:a name with spaces (deleted)', 4, 0),
      mapping('7ffd1a2b0000-7ffd1a2d1000 rw-p 00000000 00:00 0                          [stack]', 68, 68),
    ].join('\n') + '\n';
    expect(splitRss(smaps, NODE)).toEqual({
      rssKb: 5000 + 16000 + 120 + 60 + 2000 + 4000 + 1300 + 16 + 4 + 68,
      binaryKb: 5000 + 16000 + 20,
      anonymousKb: 100 + 60 + 2000 + 4000 + 16 + 68,
      otherKb: 1300 + 4,
    });
  });

  it('tells the binary by its whole path, spaces and a "(deleted)" mark included', () => {
    const smaps = [
      mapping('00400000-00b6f000 r-xp 00000000 fe:00 1 /opt/my node/bin/node (deleted)', 300, 0),
      mapping('00c00000-00c10000 r-xp 00000000 fe:00 2 /opt/my node/bin/node-helper', 20, 0),
    ].join('\n');
    expect(splitRss(smaps, '/opt/my node/bin/node (deleted)')).toEqual({ rssKb: 320, binaryKb: 300, anonymousKb: 0, otherKb: 20 });
    expect(splitRss(smaps, '/opt/my node/bin/node').binaryKb).toBe(0);
  });

  it('refuses a text that is not smaps', () => {
    expect(() => splitRss('', NODE)).toThrow(/no mapping/);
    expect(() => splitRss('Rss:  4 kB\n', NODE)).toThrow(/before any mapping/);
  });
});

describe.skipIf(!existsSync('/proc/self/smaps'))('splitRss of a real /proc/self/smaps', () => {
  it('finds this Node process\'s binary pages and anonymous memory, adding up to its RSS', () => {
    const binary = readlinkSync('/proc/self/exe');
    const text = readFileSync('/proc/self/smaps', 'utf8');
    const split = splitRss(text, binary);
    expect(text).toContain(binary);
    // Node's code alone is tens of MB, and running this test touched a good part of it; V8's heap is anonymous.
    expect(split.binaryKb).toBeGreaterThan(10 * 1024);
    expect(split.anonymousKb).toBeGreaterThan(5 * 1024);
    // The shared libraries Node links (libc, ld.so) and the vDSO.
    expect(split.otherKb).toBeGreaterThan(0);
    expect(split.binaryKb + split.anonymousKb + split.otherKb).toBe(split.rssKb);
    // The same pages VmRSS counts, read a moment apart: other tests' work in this process (a collection, a
    // buffer freed) moves it by some MB meanwhile on a loaded machine, not by a tenth.
    const vmRssKb = Number(/^VmRSS:\s+(\d+) kB$/m.exec(readFileSync('/proc/self/status', 'utf8'))![1]);
    expect(Math.abs(split.rssKb - vmRssKb)).toBeLessThan(Math.max(8192, vmRssKb * 0.1));
  });

  it('reads the same for the process by its pid', () => {
    const split = readRssSplit(process.pid);
    expect(split.binaryKb).toBeGreaterThan(10 * 1024);
    expect(split.binaryKb + split.anonymousKb + split.otherKb).toBe(split.rssKb);
  });
});
